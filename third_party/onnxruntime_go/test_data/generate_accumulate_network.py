# This script creates example_accumulate.onnx to use in testing outputs bound
# to device memory and fed back as inputs: a [-1] float32 input "x" gives
# "y" = x + 1 and "n" = the shape of x (int64 [1]).
import onnx
from onnx import TensorProto, helper


def main():
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["y"]),
         helper.make_node("Shape", ["x"], ["n"])],
        "accumulate",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["len"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["len"]),
         helper.make_tensor_value_info("n", TensorProto.INT64, [1])],
        initializer=[one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    output_name = "example_accumulate.onnx"
    onnx.save(model, output_name)
    print(f"Saved {output_name} OK.")


if __name__ == "__main__":
    main()
