"""A keyplane.v1 client in Python, generated from the .proto at test time.

Usage: control_client.py GENERATED_DIR HOST:PORT
Creates a table, writes a batch, reads it back (exact and full scan),
checks a bad batch's status, and subscribes (a snapshot, then a delta).
"""
import sys

sys.path.insert(0, sys.argv[1])
import grpc  # noqa: E402
from keyplane.v1 import control_pb2 as pb  # noqa: E402
from keyplane.v1 import control_pb2_grpc as rpc  # noqa: E402

ch = grpc.insecure_channel(sys.argv[2])
stub = rpc.ControlStub(ch)
info = stub.CreateTable(pb.CreateTableRequest(name="py", structure="ludo", value_bits=8, key_format=pb.KEY_FORMAT_IPV4))
assert info.name == "py" and info.n == 0, info

ups = [pb.Update(type=pb.Update.INSERT, entry=pb.Entry(key=pb.Key(text=f"10.0.0.{i}"), value=i)) for i in range(1, 51)]
r = stub.Write(pb.WriteRequest(table="py", updates=ups))
assert r.sequence == 50, r

try:
    stub.Write(pb.WriteRequest(table="py", updates=[
        pb.Update(type=pb.Update.MODIFY, entry=pb.Entry(key=pb.Key(text="10.0.0.1"), value=7)),
        pb.Update(type=pb.Update.INSERT, entry=pb.Entry(key=pb.Key(text="10.0.0.2"), value=1)),
    ]))
    raise AssertionError("a batch with an INSERT of a present key must fail")
except grpc.RpcError as e:
    assert e.code() == grpc.StatusCode.ALREADY_EXISTS, e
    assert e.details().startswith("update 1:"), e.details()

got = {}
for chunk in stub.Read(pb.ReadRequest(table="py")):
    assert chunk.sequence == 50
    for e in chunk.entries:
        got[bytes(e.key.raw)] = e.value
assert got == {bytes([10, 0, 0, i]): i for i in range(1, 51)}, got
one = list(stub.Read(pb.ReadRequest(table="py", keys=[pb.Key(text="10.0.0.1")])))
assert [(bytes(e.key.raw), e.value) for c in one for e in c.entries] == [(bytes([10, 0, 0, 1]), 1)], "MODIFY was not applied"

stream = stub.Subscribe(pb.SubscribeRequest(table="py", subscriber="python"))
first = next(stream)
assert first.WhichOneof("update") == "snapshot" and first.snapshot.sequence == 50, first
stub.Write(pb.WriteRequest(table="py", updates=[
    pb.Update(type=pb.Update.MODIFY, entry=pb.Entry(key=pb.Key(text="10.0.0.3"), value=9))]))
second = next(stream)
assert second.WhichOneof("update") == "delta" and second.delta.sequence == 51, second
assert second.delta.epoch == first.snapshot.epoch
stream.cancel()
stub.DropTable(pb.DropTableRequest(name="py"))
print("python client ok")
