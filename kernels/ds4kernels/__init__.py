"""DeepSeek V4 op references, Triton kernels and the kernel-check suite."""
