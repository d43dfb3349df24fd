"""The sweep: its plan from the command's options, the record opened for one invocation, the
stages run on Ray Tune or in this process, the live view, the outcomes only the driver knows, the
coord check it records and the screen it ends with."""
