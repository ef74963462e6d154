"""Protobuf messages and gRPC stubs generated from the repository's proto/ (`lightningstore.v1`).

`types_pb2` holds the domain types (Rollout, Attempt, Span, ...), `store_pb2`
the requests and responses, `store_pb2_grpc` the service stubs. Regenerate
with `python clients/python/generate.py`; never edit by hand.
"""
