"""The GPU check (``gpu_check.sh``): its headline table (``gpu_table``), the fused Block AttnRes
kernels against the torch path (``fused_block``) and what a GPU run covers (``gpu_plan``)."""
