"""One lock for LLVM's process-wide state: registering targets and the host JIT's first use are not
thread-safe, and the NVIDIA backend's warm-up thread does both while a compile or a launch may."""

import threading

__all__ = ["llvm_lock"]

llvm_lock = threading.Lock()
