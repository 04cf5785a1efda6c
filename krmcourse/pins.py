"""The versions of everything the lab clusters are built from, kept in one place.

Kubernetes 1.36 is a line that kwok v0.8.0 is tested against, and etcd 3.6 is the line that
Kubernetes 1.36 ships with. Changing a pin here changes the cache key, so the next
``krmcourse toolchain install`` builds the new version beside the old one.
"""

from __future__ import annotations

KUBERNETES = "v1.36.3"
ETCD = "v3.6.16"
KWOK = "v0.8.0"

#: The oldest Go that builds every pin above (Kubernetes 1.36's go.mod asks for go 1.26.0).
GO_MINIMUM = (1, 26)

KUBERNETES_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
KWOK_COMMANDS = ("kwok", "kwokctl")
