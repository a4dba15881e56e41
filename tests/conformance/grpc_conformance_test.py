#!/usr/bin/python3
"""Open Inference Protocol conformance over gRPC, from an independent client.

The client knows nothing of Maitre's code: its stubs are generated at test
time from proto/inference.proto with grpc_tools, exactly as a user of the
protocol would. It starts a real `maitre serve` (MAITRE_BINARY) on free
ports, registers the zoo MLP over HTTP, and checks every RPC, both tensor
encodings, and that bad input gets INVALID_ARGUMENT / NOT_FOUND (and a
message over the size limit RESOURCE_EXHAUSTED) while the server keeps
serving.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
import uuid

import grpc
import numpy as np
from grpc_tools import protoc

SOURCE = os.environ.get("MAITRE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
ZOO = os.environ.get("MAITRE_ZOO_DIR", os.path.join(SOURCE, ".zoo"))
BINARY = os.environ.get("MAITRE_BINARY", os.path.join(SOURCE, "build", "src", "cli", "maitre"))
# Small, so that the oversize check sends megabytes, not the default 256.
MAX_BODY_MB = 8


def generate_stubs(out_dir):
    proto_dir = os.path.join(SOURCE, "proto")
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    code = protoc.main(["protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out_dir}",
                        f"--grpc_python_out={out_dir}", os.path.join(proto_dir, "inference.proto")])
    if code != 0:
        raise RuntimeError("protoc failed")
    sys.path.insert(0, out_dir)
    import inference_pb2, inference_pb2_grpc  # noqa: E402
    return inference_pb2, inference_pb2_grpc


def multipart(fields):
    boundary = uuid.uuid4().hex
    body = b""
    for name, (filename, data) in fields.items():
        body += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; "
                 f"filename=\"{filename}\"\r\n\r\n").encode() + data + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


class GrpcConformance(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="maitre-conformance-")
        cls.pb, cls.pb_grpc = generate_stubs(cls.tmp)
        data_dir = os.path.join(cls.tmp, "data")
        cls.server = subprocess.Popen(
            [BINARY, "serve", "--data-dir", data_dir, "--http", "127.0.0.1:0", "--grpc",
             "127.0.0.1:0", "--control", "127.0.0.1:0", "--workers", "cpu-1:1",
             "--max-body-mb", str(MAX_BODY_MB)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        endpoints = os.path.join(data_dir, "endpoints.json")
        # Limits of minutes for what takes a second: a busy host is slow.
        for _ in range(1200):
            if os.path.exists(endpoints):
                break
            time.sleep(0.1)
        ep = json.load(open(endpoints))
        cls.http, cls.grpc_address = ep["http"], ep["grpc"]
        cls.channel = grpc.insecure_channel(cls.grpc_address)
        cls.stub = cls.pb_grpc.GRPCInferenceServiceStub(cls.channel)
        for _ in range(1800):
            if cls.stub.ServerReady(cls.pb.ServerReadyRequest()).ready:
                break
            time.sleep(0.1)
        meta = json.dumps({"format": "torchscript",
                           "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, 1, 28, 28]}],
                           "outputs": [{"name": "logits", "datatype": "FP32", "shape": [-1, 10]}]})
        with open(os.path.join(ZOO, "fmnist-mlp.pt"), "rb") as f:
            model_bytes = f.read()
        body, ctype = multipart({
            "model": ("m.pt", model_bytes),
            "meta": ("meta.json", meta.encode()),
        })
        req = urllib.request.Request(cls.http + "/v2/apps/conformance/models/fmnist-mlp", data=body,
                                     headers={"Content-Type": ctype}, method="POST")
        with urllib.request.urlopen(req, timeout=300) as r:
            assert r.status in (200, 201), r.read()
        valset = np.load(os.path.join(ZOO, "valset.npz"))
        cls.images = valset["inputs"][:8]
        cls.labels = valset["labels"][:8]

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.send_signal(signal.SIGTERM)
        cls.server.wait(timeout=30)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def infer_request(self, images, raw=True, name="fmnist-mlp"):
        req = self.pb.ModelInferRequest(model_name=name, id="q1")
        tensor = req.inputs.add(name="input", datatype="FP32", shape=list(images.shape))
        if raw:
            req.raw_input_contents.append(images.astype(np.float32).tobytes())
        else:
            tensor.contents.fp32_contents.extend(images.astype(np.float32).ravel().tolist())
        return req

    def check_answer(self, response, n):
        self.assertEqual(response.model_name, "fmnist-mlp")
        self.assertEqual(response.id, "q1")
        self.assertEqual(list(response.outputs[0].shape), [n, 10])
        self.assertEqual(response.outputs[0].datatype, "FP32")
        logits = np.frombuffer(response.raw_output_contents[0], dtype=np.float32).reshape(n, 10)
        correct = int((logits.argmax(1) == self.labels[:n]).sum())
        self.assertGreaterEqual(correct, n - 2)
        self.assertIn("worker", response.parameters)
        self.assertGreater(response.parameters["total_us"].int64_param, 0)

    def test_health_and_metadata(self):
        self.assertTrue(self.stub.ServerLive(self.pb.ServerLiveRequest()).live)
        self.assertTrue(self.stub.ServerReady(self.pb.ServerReadyRequest()).ready)
        server = self.stub.ServerMetadata(self.pb.ServerMetadataRequest())
        self.assertEqual(server.name, "maitre")
        self.assertIn("binary_tensor_data", server.extensions)
        model = self.stub.ModelMetadata(self.pb.ModelMetadataRequest(name="fmnist-mlp"))
        self.assertEqual(model.inputs[0].name, "input")
        self.assertEqual(list(model.inputs[0].shape), [-1, 1, 28, 28])
        self.assertEqual(model.outputs[0].datatype, "FP32")
        self.assertIn("torch", model.versions)
        self.assertTrue(self.stub.ModelReady(self.pb.ModelReadyRequest(name="fmnist-mlp")).ready)

    def test_infer_raw_and_typed_contents(self):
        self.check_answer(self.stub.ModelInfer(self.infer_request(self.images, raw=True)), 8)
        self.check_answer(self.stub.ModelInfer(self.infer_request(self.images[:3], raw=False)), 3)
        pinned = self.infer_request(self.images[:2])
        pinned.model_version = "torch"
        response = self.stub.ModelInfer(pinned)
        self.assertEqual(response.model_version, "torch")

    def expect_code(self, call, code):
        with self.assertRaises(grpc.RpcError) as caught:
            call()
        self.assertEqual(caught.exception.code(), code, caught.exception.details())
        self.assertTrue(caught.exception.details())  # a message a person can act on

    def test_bad_input_is_refused_and_serving_continues(self):
        # Bytes that are not a ModelInferRequest at all.
        garbage = self.channel.unary_unary(
            "/inference.GRPCInferenceService/ModelInfer",
            request_serializer=lambda b: b, response_deserializer=lambda b: b)
        with self.assertRaises(grpc.RpcError) as caught:
            garbage(b"\xff\xff\xff\xff\x0f\x01garbage")
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        # Wrong sizes: shape × datatype does not match the bytes.
        short = self.infer_request(self.images[:2])
        short.raw_input_contents[0] = short.raw_input_contents[0][:-4]
        self.expect_code(lambda: self.stub.ModelInfer(short), grpc.StatusCode.INVALID_ARGUMENT)
        typed = self.infer_request(self.images[:2], raw=False)
        del typed.inputs[0].contents.fp32_contents[-1]
        self.expect_code(lambda: self.stub.ModelInfer(typed), grpc.StatusCode.INVALID_ARGUMENT)
        wrong_shape = self.pb.ModelInferRequest(model_name="fmnist-mlp")
        wrong_shape.inputs.add(name="input", datatype="FP32", shape=[1, 784])
        wrong_shape.raw_input_contents.append(np.zeros(784, np.float32).tobytes())
        self.expect_code(lambda: self.stub.ModelInfer(wrong_shape), grpc.StatusCode.INVALID_ARGUMENT)
        bad_dtype = self.infer_request(self.images[:1])
        bad_dtype.inputs[0].datatype = "FLOAT"
        self.expect_code(lambda: self.stub.ModelInfer(bad_dtype), grpc.StatusCode.INVALID_ARGUMENT)
        # An input under another name than the model's is not guessed at.
        misnamed = self.infer_request(self.images[:1])
        misnamed.inputs[0].name = "INPUT__0"
        self.expect_code(lambda: self.stub.ModelInfer(misnamed), grpc.StatusCode.INVALID_ARGUMENT)
        # NaN and infinities, raw or typed, name the element that holds them.
        for value, raw in ((np.nan, True), (np.inf, False), (-np.inf, True)):
            images = self.images[:2].astype(np.float32)
            images[1, 0, 3, 4] = value
            with self.assertRaises(grpc.RpcError) as caught:
                self.stub.ModelInfer(self.infer_request(images, raw=raw))
            self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("element 88 of row 1", caught.exception.details())
        # Unknown names.
        self.expect_code(lambda: self.stub.ModelInfer(self.infer_request(self.images[:1], name="nope")),
                         grpc.StatusCode.NOT_FOUND)
        self.expect_code(lambda: self.stub.ModelMetadata(self.pb.ModelMetadataRequest(name="nope")),
                         grpc.StatusCode.NOT_FOUND)
        unknown_version = self.infer_request(self.images[:1])
        unknown_version.model_version = "tensorrt"
        self.expect_code(lambda: self.stub.ModelInfer(unknown_version), grpc.StatusCode.NOT_FOUND)
        # --max-body-mb bounds a message: 2,000 images (~6 MB, over gRPC's own
        # default of 4) are served, 4,000 (~12.5 MB) are refused.
        large = self.infer_request(np.zeros((2000, 1, 28, 28), np.float32))
        self.assertEqual(list(self.stub.ModelInfer(large).outputs[0].shape), [2000, 10])
        oversize = self.infer_request(np.zeros((4000, 1, 28, 28), np.float32))
        self.assertGreater(oversize.ByteSize(), MAX_BODY_MB << 20)
        self.expect_code(lambda: self.stub.ModelInfer(oversize), grpc.StatusCode.RESOURCE_EXHAUSTED)
        # And the server still serves.
        self.check_answer(self.stub.ModelInfer(self.infer_request(self.images)), 8)


if __name__ == "__main__":
    unittest.main(verbosity=2)
