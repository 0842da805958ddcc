#!/usr/bin/env bash
# Builds the real control plane from the Go modules pinned in controlplane/ (and controlplane/kwok/) into a
# cache outside the clone, keyed by those files, the Go version and the flags: a second clone on the same
# machine rebuilds nothing. Prints the directory of the binaries on its last line.
#
# Exit 2, with one line naming what is missing, when Go or a pinned module cannot be had.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
modules="$root/controlplane"

missing() { echo "controlplane: $*" >&2; exit 2; }

command -v go >/dev/null || missing "Go is not on PATH (Go >= 1.26 builds the control plane; kubesim, the default engine, needs none)"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
go_version=$(go env GOVERSION)
case "$go_version" in
go1.2[6-9]* | go1.[3-9][0-9]*) ;;
*) missing "Go $go_version is too old: kwok v0.8.0 needs go1.26 or newer" ;;
esac

# The versions the binaries report (`kubectl version`, /version): the tags the go.mod files pin. kwok
# and etcd carry theirs as constants; koord-scheduler reports the Kubernetes libraries it is built on.
pinned() { awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$2"; }
kube_version=$(pinned k8s.io/kubernetes "$modules/go.mod")
koord_version=$(pinned github.com/koordinator-sh/koordinator "$modules/go.mod")
kwok_version=$(pinned sigs.k8s.io/kwok "$modules/kwok/go.mod")
etcd_version=$(pinned go.etcd.io/etcd/server/v3 "$modules/go.mod")

stamp() {
    local v=$1 major minor
    major=${v#v}; major=${major%%.*}
    minor=${v#v*.}; minor=${minor%%.*}
    local pkg
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        printf -- '-X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean ' \
            "$pkg" "$v" "$pkg" "$major" "$pkg" "$minor" "$pkg"
    done
}
flags="-trimpath"
ldflags_kube="-s -w $(stamp "$kube_version")"

key=$(
    {
        cat "$0" "$modules/go.mod" "$modules/go.sum" "$modules/kwok/go.mod" "$modules/kwok/go.sum"
        echo "$go_version $(go env GOOS GOARCH) $flags"
        echo "$ldflags_kube"
    } | sha256sum | cut -c1-16
)
cache=${PODHERD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/podherd}
dest="$cache/controlplane/$key"
if [ -f "$dest/complete" ]; then
    echo "controlplane: built already ($kube_version, koordinator $koord_version, kwok $kwok_version, etcd $etcd_version)" >&2
    echo "$dest/bin"
    exit 0
fi

# Modules first, so that one the proxy refuses is named alone rather than inside a compiler's output.
download() {
    local dir=$1 log
    log=$(cd "$dir" && go mod download 2>&1) && return 0
    local what
    what=$(grep -oE '[a-zA-Z0-9./_-]+@v[0-9][^:[:space:]]*' <<<"$log" | head -1)
    missing "module ${what:-of $dir} cannot be had from the Go module proxy ($(tail -1 <<<"$log"))"
}
download "$modules"
download "$modules/kwok"

work="$dest.partial.$$"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
start=$(date +%s)
echo "controlplane: building $kube_version, koordinator $koord_version, kwok $kwok_version, etcd $etcd_version into $dest" >&2
(
    cd "$modules"
    go build $flags -ldflags "$ldflags_kube" -o "$work/bin/" \
        k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
    go build $flags -ldflags "-s -w" -o "$work/bin/etcd" go.etcd.io/etcd/server/v3
    go build $flags -ldflags "$ldflags_kube" -o "$work/bin/" \
        github.com/koordinator-sh/koordinator/cmd/koord-scheduler github.com/koordinator-sh/koordinator/cmd/koord-descheduler
)
(cd "$modules/kwok" && go build $flags -ldflags "-s -w" -o "$work/bin/" sigs.k8s.io/kwok/cmd/kwok)

# From the very modules the binaries were built from: the CRDs koord-scheduler needs installed, and kwok's
# stages for a node's start and heartbeat and a pod's start and end (graceful deletion is Podherd's own).
module_dir() { (cd "$1" && go list -m -f '{{.Dir}}' "$2"); }
koord_dir=$(module_dir "$modules" github.com/koordinator-sh/koordinator)
kwok_dir=$(module_dir "$modules/kwok" sigs.k8s.io/kwok)
mkdir -p "$work/crds" "$work/kwok-stages"
cp "$koord_dir"/config/crd/bases/*.yaml "$work/crds/"
cp "$kwok_dir"/kustomize/stage/node/fast/node-initialize.yaml \
    "$kwok_dir"/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    "$kwok_dir"/kustomize/stage/pod/fast/pod-ready.yaml \
    "$kwok_dir"/kustomize/stage/pod/fast/pod-complete.yaml "$work/kwok-stages/"
chmod -R u+w "$work/crds" "$work/kwok-stages"

cat >"$work/versions" <<EOF
kubernetes $kube_version
koordinator $koord_version
kwok $kwok_version
etcd $etcd_version
$go_version
EOF
touch "$work/complete"
rm -rf "$dest"
mv "$work" "$dest"
trap - EXIT
echo "controlplane: built in $(($(date +%s) - start)) s" >&2
echo "$dest/bin"
