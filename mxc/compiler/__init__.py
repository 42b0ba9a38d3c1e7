"""The compiler: IR, operator registry, inference, passes and partitioning."""
