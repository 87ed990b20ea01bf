"""The implementation of kiln.library (custom operators; decision 0111): schema parsing and
binding (schema.py), schema inference from annotations (infer_schema.py), the operator
registry and dispatcher (ops.py), Library (lib.py), custom_op (custom_ops.py), the generated
autograd Functions (autograd.py), fake impls on the meta device (fake_impl.py) and opcheck
(opcheck.py)."""
