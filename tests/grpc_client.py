#!/usr/bin/python3
"""A TF Serving gRPC client against a running `tensorhub serve`, for tests/serve_grpc_test.cpp.

Stubs are generated at start with grpc_tools.protoc (Debian's python3-grpc-tools) from the
project's proto/ into a temporary directory, as a user would generate them from TF Serving's
.proto files. Every PredictionService and ModelService method is called, errors are checked
for their gRPC code and the field their message names, and Predict's answers are compared
with the REST API's for the same inputs.

usage: grpc_client.py --proto_dir DIR --grpc HOST:PORT --rest http://HOST:PORT --base_path DIR
Prints one line per check; exits 1 at the first failure, saying what differed.
"""
import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def generate_stubs(proto_dir, out_dir):
    protos = subprocess.run(
        ["find", "tensorflow", "tensorflow_serving", "-name", "*.proto"],
        cwd=proto_dir, check=True, capture_output=True, text=True).stdout.split()
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + proto_dir, "--python_out=" + out_dir,
                    "--grpc_python_out=" + out_dir] + protos, cwd=proto_dir, check=True)
    sys.path.insert(0, out_dir)


def fail(what):
    print("FAIL: " + what, flush=True)
    sys.exit(1)


def check(cond, what):
    if not cond:
        fail(what)
    print("ok: " + what, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proto_dir", required=True)
    ap.add_argument("--grpc", required=True)
    ap.add_argument("--rest", required=True)
    ap.add_argument("--base_path", required=True, help="half_plus_two's base path, for reload configs")
    ap.add_argument("--max_batch_size", type=int, default=0, help="the server's batching limit (0: not batching)")
    args = ap.parse_args()

    out_dir = tempfile.mkdtemp(prefix="tensorhub-grpc-stubs-")
    generate_stubs(args.proto_dir, out_dir)
    import grpc
    from google.protobuf import text_format
    from tensorflow.core.framework import tensor_pb2, types_pb2
    from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2, get_model_status_pb2,
                                         model_management_pb2, model_service_pb2_grpc, predict_pb2,
                                         prediction_service_pb2_grpc, regression_pb2)

    channel = grpc.insecure_channel(args.grpc)
    predict_stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    model_stub = model_service_pb2_grpc.ModelServiceStub(channel)

    def rest(path, body=None):
        req = urllib.request.Request(args.rest + path, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def status_request(model, version=None):
        req = get_model_status_pb2.GetModelStatusRequest()
        req.model_spec.name = model
        if version is not None:
            req.model_spec.version.value = version
        return req

    # Wait until half_plus_two is AVAILABLE (the server loads it after it starts listening).
    deadline = time.time() + 60
    while True:
        try:
            s = model_stub.GetModelStatus(status_request("half_plus_two"), timeout=5)
            if any(v.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE for v in s.model_version_status):
                break
        except grpc.RpcError as e:
            if time.time() > deadline:
                fail("half_plus_two never became AVAILABLE: " + str(e))
        time.sleep(0.2)

    # GetModelStatus: the one version, AVAILABLE, OK.
    s = model_stub.GetModelStatus(status_request("half_plus_two"))
    check(len(s.model_version_status) == 1 and s.model_version_status[0].version == 123 and
          s.model_version_status[0].state == get_model_status_pb2.ModelVersionStatus.AVAILABLE and
          s.model_version_status[0].status.error_code == 0,
          "GetModelStatus: version 123 AVAILABLE, error_code OK: " + text_format.MessageToString(s, as_one_line=True))

    def expect_error(call, request, code, substring, what):
        try:
            call(request, timeout=30)
        except grpc.RpcError as e:
            check(e.code() == code and substring in e.details(),
                  "%s: %s with %r (got %s %r)" % (what, code.name, substring, e.code().name, e.details()))
            return
        fail(what + ": succeeded, expected " + code.name)

    expect_error(model_stub.GetModelStatus, status_request("nope"), grpc.StatusCode.NOT_FOUND, "nope",
                 "GetModelStatus of an unknown model")

    # Predict, typed field and tensor_content, against REST for the same inputs.
    def predict_request(values, model="half_plus_two", content=False, dtype=types_pb2.DT_FLOAT):
        req = predict_pb2.PredictRequest()
        req.model_spec.name = model
        t = req.inputs["x"]
        t.dtype = dtype
        t.tensor_shape.dim.add().size = len(values)
        if content:
            import struct
            t.tensor_content = struct.pack("<%df" % len(values), *values)
        elif dtype == types_pb2.DT_DOUBLE:
            t.double_val.extend(values)
        else:
            t.float_val.extend(values)
        return req

    xs = [1.0, 2.0, 5.0, -3.25]
    r = predict_stub.Predict(predict_request(xs))
    y = r.outputs["y"]
    check(y.dtype == types_pb2.DT_FLOAT and [d.size for d in y.tensor_shape.dim] == [4] and
          list(y.float_val) == [2.5, 3.0, 4.5, 0.375], "Predict half_plus_two: " + str(list(y.float_val)))
    check(r.model_spec.name == "half_plus_two" and r.model_spec.version.value == 123 and
          r.model_spec.signature_name == "serving_default",
          "Predict's model_spec names the model, version 123 and serving_default")
    via_rest = rest("/v1/models/half_plus_two:predict", {"inputs": {"x": xs}})["outputs"]
    check(via_rest == list(y.float_val), "Predict over gRPC equals REST: %s == %s" % (list(y.float_val), via_rest))
    rows = rest("/v1/models/half_plus_two:predict", {"instances": xs})["predictions"]
    check(rows == list(y.float_val), "Predict over gRPC equals REST's row format")
    r2 = predict_stub.Predict(predict_request(xs, content=True))
    check(list(r2.outputs["y"].float_val) == list(y.float_val), "Predict from tensor_content equals float_val")
    # A request and an answer larger than the 8 KiB each call's messages start in (the server's
    # arena grows): 5,000 floats each way (no more than a batch when the server batches).
    big = [i / 8.0 for i in range(5000 if not args.max_batch_size else min(5000, args.max_batch_size))]
    for content in (False, True):
        got = list(predict_stub.Predict(predict_request(big, content=content)).outputs["y"].float_val)
        check(got == [0.5 * v + 2 for v in big] and got == rest("/v1/models/half_plus_two:predict", {"instances": big})["predictions"],
              "Predict of %d floats (tensor_content %s) equals REST's and 0.5 x + 2" % (len(big), content))

    # version, version_label, output_filter, empty signature_name.
    req = predict_request([4.0])
    req.model_spec.version.value = 123
    req.output_filter.append("y")
    check(list(predict_stub.Predict(req).outputs["y"].float_val) == [4.0], "Predict with version 123 and output_filter y")
    req = predict_request([4.0])
    req.model_spec.version_label = "stable"
    check(list(predict_stub.Predict(req).outputs["y"].float_val) == [4.0], "Predict with version_label stable")

    # Errors: codes as TF Serving's, messages naming the field.
    code = grpc.StatusCode
    expect_error(predict_stub.Predict, predict_request([1.0], model="nope"), code.NOT_FOUND, "nope", "unknown model")
    req = predict_request([1.0])
    req.model_spec.version.value = 7
    expect_error(predict_stub.Predict, req, code.NOT_FOUND, "7", "unknown version")
    req = predict_request([1.0])
    req.model_spec.version_label = "canary"
    expect_error(predict_stub.Predict, req, code.INVALID_ARGUMENT, "canary", "unknown version label")
    req = predict_request([1.0])
    req.model_spec.signature_name = "nope"
    expect_error(predict_stub.Predict, req, code.FAILED_PRECONDITION, "signature_name", "unknown signature")
    # A classify or regress signature reads tf.Examples: the error names the method to call.
    req.model_spec.signature_name = "regress_x_to_y"
    expect_error(predict_stub.Predict, req, code.INVALID_ARGUMENT,
                 "signature regress_x_to_y (model_spec.signature_name) has method_name tensorflow/serving/regress: "
                 "it reads tf.Examples; call Regress with a RegressionRequest", "Predict on a regress signature")
    req.model_spec.signature_name = "classify_x_to_y"
    expect_error(predict_stub.Predict, req, code.INVALID_ARGUMENT, "call Classify with a ClassificationRequest",
                 "Predict on a classify signature")
    expect_error(predict_stub.Predict, predict_request([1.0], dtype=types_pb2.DT_DOUBLE), code.INVALID_ARGUMENT,
                 'inputs["x"]: expects arg to be DT_FLOAT but DT_DOUBLE', "wrong dtype")
    req = predict_request([1.0])
    req.inputs["z"].CopyFrom(req.inputs["x"])
    expect_error(predict_stub.Predict, req, code.INVALID_ARGUMENT, "alias not found in signature: z", "unknown input")
    req = predict_request([1.0])
    del req.inputs["x"]
    expect_error(predict_stub.Predict, req, code.INVALID_ARGUMENT, "Missing but required: {x}", "missing input")
    req = predict_request([1.0])
    req.output_filter.append("z")
    expect_error(predict_stub.Predict, req, code.INVALID_ARGUMENT, "(output_filter)", "unknown output_filter entry")
    req = predict_request([1.0, 2.0])
    req.inputs["x"].tensor_content = b"\0\0\0\0"
    del req.inputs["x"].float_val[:]
    expect_error(predict_stub.Predict, req, code.INVALID_ARGUMENT, 'inputs["x"].tensor_content holds 4 bytes',
                 "tensor_content of the wrong size")
    expect_error(predict_stub.Predict, predict_pb2.PredictRequest(), code.INVALID_ARGUMENT, "model_spec",
                 "no model_spec")

    # GetModelMetadata: a SignatureDefMap in an Any, as REST's metadata says.
    req = get_model_metadata_pb2.GetModelMetadataRequest()
    req.model_spec.name = "half_plus_two"
    req.metadata_field.append("signature_def")
    m = predict_stub.GetModelMetadata(req)
    defs = get_model_metadata_pb2.SignatureDefMap()
    check(m.metadata["signature_def"].Unpack(defs), "GetModelMetadata: signature_def unpacks as SignatureDefMap")
    sig = defs.signature_def["serving_default"]
    rest_sig = rest("/v1/models/half_plus_two/metadata")["metadata"]["signature_def"]["signature_def"]["serving_default"]
    check(sig.method_name == rest_sig["method_name"] and sig.inputs["x"].dtype == types_pb2.DT_FLOAT and
          sig.inputs["x"].name == rest_sig["inputs"]["x"]["name"] and
          [d.size for d in sig.inputs["x"].tensor_shape.dim] ==
          [int(d["size"]) for d in rest_sig["inputs"]["x"]["tensor_shape"]["dim"]] and
          m.model_spec.version.value == 123,
          "GetModelMetadata's serving_default equals REST's: " + text_format.MessageToString(sig, as_one_line=True))
    req.metadata_field[0] = "graph"
    expect_error(predict_stub.GetModelMetadata, req, code.INVALID_ARGUMENT, "metadata_field", "unsupported metadata_field")

    # Regress and Classify: half_plus_two's regress_x_to_y and classify_x_to_y read feature x
    # of tf.Examples; the answers equal REST's :regress and :classify.
    def examples_request(module, cls, values, signature="", context=None):
        req = getattr(module, cls)()
        req.model_spec.name = "half_plus_two"
        req.model_spec.signature_name = signature
        if context is None:
            for v in values:
                req.input.example_list.examples.add().features.feature["x"].float_list.value.append(v)
        else:
            for v in values:
                req.input.example_list_with_context.examples.add().features.feature["other"].float_list.value.append(v)
            req.input.example_list_with_context.context.features.feature["x"].float_list.value.append(context)
        return req

    rr = predict_stub.Regress(examples_request(regression_pb2, "RegressionRequest", [1.0, 3.0]))
    got = [r.value for r in rr.result.regressions]
    check(got == [2.5, 3.5] and rr.model_spec.signature_name == "regress_x_to_y" and rr.model_spec.version.value == 123,
          "Regress half_plus_two (no signature named): %s via %s" % (got, rr.model_spec.signature_name))
    via_rest = rest("/v1/models/half_plus_two:regress", {"examples": [{"x": 1.0}, {"x": 3.0}]})["results"]
    check(via_rest == got, "Regress over gRPC equals REST: %s == %s" % (got, via_rest))
    rr = predict_stub.Regress(examples_request(regression_pb2, "RegressionRequest", [0.0, 0.0], context=4.0))
    check([r.value for r in rr.result.regressions] == [4.0, 4.0], "Regress merges the context into each example")
    cr = predict_stub.Classify(examples_request(classification_pb2, "ClassificationRequest", [2.0], "classify_x_to_y"))
    got = [[(c.label, c.score) for c in k.classes] for k in cr.result.classifications]
    via_rest = rest("/v1/models/half_plus_two:classify", {"signature_name": "classify_x_to_y", "examples": [{"x": 2.0}]})
    check(got == [[("", 3.0)]] and [[tuple(p) for p in e] for e in via_rest["results"]] == got,
          "Classify over gRPC equals REST: %s, %s" % (got, via_rest))
    expect_error(predict_stub.Regress, examples_request(regression_pb2, "RegressionRequest", [1.0], "serving_default"),
                 code.INVALID_ARGUMENT, "Expected regression signature method_name to be tensorflow/serving/regress",
                 "Regress on a predict signature")
    expect_error(predict_stub.Classify, examples_request(classification_pb2, "ClassificationRequest", [1.0], "regress_x_to_y"),
                 code.INVALID_ARGUMENT, "Expected classification signature method_name", "Classify on a regress signature")
    expect_error(predict_stub.Regress, examples_request(regression_pb2, "RegressionRequest", [1.0], "nope"),
                 code.INVALID_ARGUMENT, "No signature was found with the name: nope", "Regress on an unknown signature")
    req = regression_pb2.RegressionRequest()
    req.model_spec.name = "half_plus_two"
    req.input.example_list.examples.add().features.feature["y"].float_list.value.append(1.0)
    expect_error(predict_stub.Regress, req, code.INVALID_ARGUMENT, "Feature: x (data type: float) is required",
                 "Regress without feature x")
    req.input.example_list.examples[0].features.feature["x"].int64_list.value.append(1)
    expect_error(predict_stub.Regress, req, code.INVALID_ARGUMENT, "Data types don't match", "Regress with an int64 x")
    req = regression_pb2.RegressionRequest()
    req.model_spec.name = "half_plus_two"
    expect_error(predict_stub.Regress, req, code.INVALID_ARGUMENT, "Input is empty", "Regress without examples")

    # HandleReloadConfigRequest while Predict calls keep coming: none of them may fail.
    stop = threading.Event()
    failures = []
    calls = [0]

    def hammer():
        while not stop.is_set():
            try:
                out = predict_stub.Predict(predict_request([2.0]), timeout=30)
                if list(out.outputs["y"].float_val) != [3.0]:
                    failures.append("wrong answer " + str(out))
                calls[0] += 1
            except grpc.RpcError as e:
                failures.append(e.code().name + " " + e.details())

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()

    def reload(text):
        req = model_management_pb2.ReloadConfigRequest()
        text_format.Parse(text, req.config)
        return model_stub.HandleReloadConfigRequest(req, timeout=60)

    def config(*models):
        return "model_config_list {" + "".join(models) + "}"

    hp = 'config { name: "half_plus_two" base_path: "%s" model_platform: "tensorflow" %s }'
    two = 'config { name: "two" base_path: "%s" model_platform: "tensorflow" version_labels { key: "%s" value: 123 } }'
    resp = reload(config(hp % (args.base_path, 'version_labels { key: "stable" value: 123 }'),
                         two % (args.base_path, "blue")))
    check(resp.status.error_code == 0, "HandleReloadConfigRequest adds model two: " + str(resp.status))
    s = model_stub.GetModelStatus(status_request("two"))
    check([(v.version, v.state) for v in s.model_version_status] ==
          [(123, get_model_status_pb2.ModelVersionStatus.AVAILABLE)], "after the reload, model two is AVAILABLE")
    req = predict_request([6.0], model="two")
    req.model_spec.version_label = "blue"
    check(list(predict_stub.Predict(req).outputs["y"].float_val) == [5.0], "model two answers with its label blue")
    check(rest("/v1/models/two")["model_version_status"][0]["state"] == "AVAILABLE", "REST sees model two too")

    # Labels changed: blue -> green; blue is unknown afterwards.
    resp = reload(config(hp % (args.base_path, 'version_labels { key: "stable" value: 123 }'),
                         two % (args.base_path, "green")))
    check(resp.status.error_code == 0, "HandleReloadConfigRequest changes two's label to green")
    req.model_spec.version_label = "green"
    check(list(predict_stub.Predict(req).outputs["y"].float_val) == [5.0], "label green answers")
    req.model_spec.version_label = "blue"
    expect_error(predict_stub.Predict, req, code.INVALID_ARGUMENT, "blue", "label blue is gone")

    # A label on a version that is not loaded is refused, as TF Serving does.
    try:
        reload(config(hp % (args.base_path, 'version_labels { key: "stable" value: 999 }')))
        fail("a label on version 999 was accepted")
    except grpc.RpcError as e:
        check(e.code() == code.FAILED_PRECONDITION and "999" in e.details() and "half_plus_two" in e.details(),
              "a label on a version not loaded: FAILED_PRECONDITION naming model and version: " + e.details())

    # Model two removed.
    resp = reload(config(hp % (args.base_path, 'version_labels { key: "stable" value: 123 }')))
    check(resp.status.error_code == 0, "HandleReloadConfigRequest removes model two")
    expect_error(predict_stub.Predict, predict_request([1.0], model="two"), code.NOT_FOUND, "two",
                 "model two is gone")
    try:
        reload("custom_model_config { }")
        fail("a custom_model_config was accepted")
    except grpc.RpcError as e:
        check(e.code() == code.INVALID_ARGUMENT and "custom_model_config" in e.details(),
              "custom_model_config: INVALID_ARGUMENT naming it")

    time.sleep(0.3)
    stop.set()
    for t in threads:
        t.join()
    check(not failures and calls[0] > 0,
          "%d Predict calls during the reloads, none failed %s" % (calls[0], failures[:3]))
    print("all checks passed", flush=True)


if __name__ == "__main__":
    main()
