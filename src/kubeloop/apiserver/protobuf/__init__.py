"""Kubernetes protobuf (``application/vnd.kubernetes.protobuf``) without generated code.

``wire`` is the protobuf wire format; ``descriptors`` reads the message tables of the Kubernetes
types from the descriptors shipped with kubeloop (compiled from upstream's ``generated.proto``
files by ``scripts/generate_protobuf_descriptors.py``); ``codec`` turns an envelope into the
object's JSON form and back, so everything after decoding is shared with JSON requests.
"""
