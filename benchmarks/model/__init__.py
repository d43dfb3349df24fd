"""One model's costs, measured on whatever device runs them (`make bench` on the CPU, the GPU check
on a GPU): step time and memory per wiring, their growth with depth and width, utilization,
decoding, inference, diagnostics, compilation and its cache, and the memory plan against peaks."""
