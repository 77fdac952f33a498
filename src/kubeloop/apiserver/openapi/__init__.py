"""What the server says about itself: discovery (``/api``, ``/apis``, resource lists), OpenAPI v3
(``v3``: one document per group/version, what kubectl 1.29+ and ``kubectl explain`` read) and
OpenAPI v2 as protobuf (``v2``: what kubectl 1.27/1.28 validate ``apply`` against). All are built
from the catalog and cached by its generation, so kinds added at run time appear at once.
"""
