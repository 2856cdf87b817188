"""Python toolchain of autoui: the Auto-UI reference model, ONNX export, fixtures."""
