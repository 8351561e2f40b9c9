#!/bin/bash
# storage: file
# t0216-kubernetes.sh - what can be checked of docs/kubernetes/ without a
# cluster: the manifests pass yamllint (docs/kubernetes/.yamllint), decode
# with kubectl offline (label --local), pass a schema check with the API's
# models (t0216-k8s-schema.py, python3-kubernetes), carry the fields the
# DaemonSet needs; and the DaemonSet's entrypoint.sh, run here against a
# real mount: it mounts, serves files, unmounts cleanly on SIGTERM (exit 0),
# and exits non-zero when the client dies.
. "$(dirname "$0")/lib.sh"

K8S=$TOPDIR/docs/kubernetes
SCHEMA=$TOPDIR/tests/integ/t0216-k8s-schema.py
MANIFESTS=$(ls "$K8S"/*.yaml)
check_eq "$(echo "$MANIFESTS" | wc -l)" 4 "manifests in docs/kubernetes"

# --- yamllint, strict (warnings fail too)
yamllint -s -c "$K8S/.yamllint" $MANIFESTS >"$TMP/lint.out" 2>&1 ||
	fail "yamllint: $(cat "$TMP/lint.out")"
# the check can fail: a duplicate key and a bad indentation are caught
sed 's/^  name: granary$/  name: granary\n  name: again/' "$K8S/daemonset.yaml" >"$TMP/bad.yaml"
expect_exit 1 "duplication of key" sh -c 'yamllint -s -c "$1" "$2" >&2' _ "$K8S/.yamllint" "$TMP/bad.yaml"
ok "yamllint -s passes every manifest, and catches a duplicate key"

# --- kubectl decodes each object offline (no cluster: label --local)
if command -v kubectl >/dev/null; then
	for f in $MANIFESTS; do
		kubectl label --local -f "$f" t0216=checked -o name >"$TMP/kc.out" 2>&1 ||
			fail "kubectl cannot decode $f: $(cat "$TMP/kc.out")"
	done
	kubectl label --local -f "$K8S/daemonset.yaml" t0216=x -o name >"$TMP/kc.out" 2>&1
	check_eq "$(sort "$TMP/kc.out" | tr '\n' ' ')" "daemonset.apps/granary namespace/granary " \
		"objects of daemonset.yaml as kubectl sees them"
	# offline it checks YAML and apiVersion/kind only (an unknown kind
	# passes: the schema check below is the one that knows kinds)
	grep -v '^kind: DaemonSet$' "$K8S/daemonset.yaml" >"$TMP/bad.yaml"
	expect_exit 1 "Object 'Kind' is missing" kubectl label --local -f "$TMP/bad.yaml" t0216=x -o name
	ok "kubectl (offline, label --local) decodes every object, and refuses one without a kind"
else
	skip "kubectl is not installed (Debian: kubernetes-client)"
fi

# --- schema check with the API's models
if /usr/bin/python3 -c 'import kubernetes' 2>/dev/null; then
	/usr/bin/python3 "$SCHEMA" $MANIFESTS >"$TMP/schema.out" 2>&1 ||
		fail "schema check: $(cat "$TMP/schema.out")"
	grep -q "5 objects, 0 problems" "$TMP/schema.out" || fail "schema check: $(cat "$TMP/schema.out")"
	# it can fail: an unknown field, a number for a string, a missing name
	sed 's/^          imagePullPolicy: IfNotPresent$/          imagePullPolicy: IfNotPresent\n          privilegd: true/' \
		"$K8S/daemonset.yaml" >"$TMP/bad.yaml"
	schema_bad() { /usr/bin/python3 "$SCHEMA" "$TMP/bad.yaml" >&2; }
	expect_exit 1 "privilegd: unknown field of V1Container" schema_bad
	sed 's/^              value: 500G$/              value: 500/' "$K8S/daemonset.yaml" >"$TMP/bad.yaml"
	expect_exit 1 "want a string, got 500" schema_bad
	sed 's/^        - name: granary$/        - image: x/' "$K8S/daemonset.yaml" >"$TMP/bad.yaml"
	expect_exit 1 "missing required field 'name'" schema_bad
	ok "schema check (python3-kubernetes models): every manifest passes; bad fields are caught"
else
	skip "python3-kubernetes is not installed: no schema check"
fi

# --- what the DaemonSet must have
DS=$K8S/daemonset.yaml
for want in "privileged: true" "mountPropagation: Bidirectional" "path: /dev/fuse" \
	"preStop:" "granary umount /mnt/granary" "prometheus.io/scrape: \"true\"" \
	"prometheus.io/port: \"9567\"" "containerPort: 9567" "nodeSelector:" \
	"secretKeyRef:" "terminationGracePeriodSeconds:"; do
	grep -qF -- "$want" "$DS" || fail "daemonset.yaml lacks '$want'"
done
grep -qF "readOnly: true" "$K8S/training-job.yaml" || fail "the dataset is not read-only in training-job.yaml"
grep -qF "subPath: checkpoints/" "$K8S/training-job.yaml" || fail "no checkpoint directory in training-job.yaml"
grep -qF "granary\", \"warmup\"" "$K8S/training-job.yaml" || fail "no warmup init container"
grep -qF "granary\", \"warmup\"" "$K8S/warmup-job.yaml" || fail "no warmup in warmup-job.yaml"
grep -q "CHANGE-ME" "$K8S/secret.yaml" || fail "secret.yaml holds something other than placeholders"
ok "the DaemonSet is privileged, has /dev/fuse, Bidirectional propagation, preStop, metrics, Secrets"

# --- entrypoint.sh outside a container, against a real mount
ENTRY=$K8S/entrypoint.sh
expect_exit 2 "GRANARY_META_URL is not set" env -u GRANARY_META_URL sh "$ENTRY"

new_volume k8s
KM=$TMP/k8s-mnt
MOUNTS="$MOUNTS $KM"
run_entry() {
	GRANARY_BIN=$GRANARY GRANARY_META_URL=$META GRANARY_MOUNTPOINT=$KM \
		GRANARY_CACHE_DIR=$TMP/cache-k8s GRANARY_CACHE_SIZE=1G GRANARY_METRICS=off \
		GRANARY_WAIT_REDIS=20 GRANARY_MOUNT_FLAGS="--log $TMP/log-k8s.log" \
		sh "$ENTRY" >"$TMP/entry.out" 2>&1 &
	EPID=$!
	bg_track "$EPID"
	wait_until 30 is_mounted "$KM" || fail "entrypoint did not mount: $(cat "$TMP/entry.out")"
}
run_entry
echo "from a pod" >"$KM/f"
check_eq "$(cat "$KM/f")" "from a pod" "a file through the entrypoint's mount"
DPIDS=$(mount_pids "$KM" 2>/dev/null)
[ -n "$DPIDS" ] || fail "no client serves $KM"
kill -TERM "$EPID"
rc=0
wait "$EPID" || rc=$?
check_eq "$rc" 0 "exit status of the entrypoint after SIGTERM"
is_mounted "$KM" && fail "still mounted after SIGTERM: $(cat "$TMP/entry.out")"
for p in $DPIDS; do kill -0 "$p" 2>/dev/null && fail "client $p outlived the entrypoint"; done
grep -q "SIGTERM: unmounting" "$TMP/entry.out" || fail "entrypoint said: $(cat "$TMP/entry.out")"
ok "entrypoint.sh: mounts from env, serves files, SIGTERM unmounts cleanly, exit 0"

# the data made it: a plain mount sees the file
mount_vol "$META" "$TMP/check"
check_eq "$(cat "$TMP/check/f")" "from a pod" "the file after the entrypoint's unmount"
umount_vol "$TMP/check"

# the client dies: the entrypoint exits non-zero and clears the dead mount
run_entry
DPIDS=$(mount_pids "$KM" 2>/dev/null)
[ -n "$DPIDS" ] || fail "no client serves $KM"
kill -KILL $DPIDS
rc=0
wait "$EPID" || rc=$?
[ "$rc" != 0 ] || fail "the entrypoint exited 0 after its client died"
grep -q "ended on its own" "$TMP/entry.out" || fail "entrypoint said: $(cat "$TMP/entry.out")"
is_mounted "$KM" && fail "the dead mount was left behind"
ok "entrypoint.sh: a client that dies makes it exit $rc, its dead mount cleared"
