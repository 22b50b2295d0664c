"""PyTorch's GEMM as a method of the peak probe on a GPU (``paradnn.hardware.probe``).

The measured ceiling of an accelerator is the best square-matmul rate of the frameworks present
(cuBLAS through XLA and through PyTorch pick their kernels separately), so the JAX backend's
probe adds this method on a GPU where PyTorch is installed. Importing this module imports no
framework: torch is imported when a method is built, that is only when the probe measures.
"""

from __future__ import annotations

from typing import Any, Callable

#: The dtypes this method measures. Not float32: torch multiplies float32 in full IEEE
#: precision by default on a GPU while the probe's float32 ceiling is labelled with the
#: reference framework's default precision (TF32 on Ampere and later), so a torch float32 rate
#: would sit under a precision label it was not measured at.
DTYPES = ("bfloat16", "float16")


def gemm_method(queue: int, device: str = "cuda") -> Callable[[str, int], Callable[[], Any] | None]:
    """A probe GEMM method (factory(dtype, N) of a zero-argument call, None for a dtype it does
    not measure or where ``device`` is absent): ``torch.matmul`` of two NxN matrices on
    ``device``, ``queue`` matmuls into one output per call, then one synchronisation (the
    call's attribute ``matmuls``, which the probe counts FLOPs by)."""
    def make(dtype: str, n: int) -> Callable[[], Any] | None:
        import torch

        if dtype not in DTYPES or (device == "cuda" and not torch.cuda.is_available()):
            return None
        dev = torch.device(device)
        generator = torch.Generator(device=dev).manual_seed(n)
        a = torch.randn(n, n, device=dev, dtype=getattr(torch, dtype), generator=generator)
        b = torch.randn(n, n, device=dev, dtype=getattr(torch, dtype), generator=generator)
        out = torch.empty(n, n, device=dev, dtype=getattr(torch, dtype))
        sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

        def call() -> Any:
            for _ in range(queue):  # the GPU runs them back to back; one wait for all
                torch.matmul(a, b, out=out)
            sync()
            return out

        call.matmuls = queue  # type: ignore[attr-defined]
        return call

    return make
