#!/usr/bin/env python3
"""Checks a Helm chart without a helm binary: `helm lint --strict`, `helm template`,
then validates every rendered manifest against the Kubernetes schemas.

Usage: helm_check.py [--binary LIGHTNING_STORE] CHART_DIR [VALUES.yaml ...]
  Checks the chart with its default values, then with each values file given
  (default: every CHART_DIR/examples/*.yaml), and that values the chart must
  refuse (REFUSED) fail to render, each with its reason. Exits 1 when
  anything fails.
  With --binary (a lightning-store built from this repository), also:
  - Chart.yaml's appVersion (the image tag the chart deploys by default) is
    the binary's version;
  - every LIGHTNING_STORE_* variable the rendered pods set (ConfigMap, env)
    and every subcommand and flag in their command lines is one the binary's
    `--help` of that subcommand documents (`serve` for the server, the client
    commands for the `helm test` pod);
  - with the default values, the server starts with the rendered ConfigMap's
    settings and the generated tokens file, and every command NOTES.txt prints
    runs against it (a stand-in `kubectl` answers `port-forward`, the server
    being on the forwarded address already, and `get secret` from the
    rendered Secret; grpcurl must be on PATH);
  - where the values render the namespaces Job (`namespaces.create`), its
    script, run against a server with the chart's settings as after an
    install and again as after an upgrade, creates every namespace once
    (with its span retention) and exits 0 both times (ALREADY_EXISTS is
    tolerated), and fails while no server answers (so Kubernetes retries it).
Needs: pip install helm-python-sdk==0.2.2 kubernetes-validate==1.37.0
"""
import base64
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import helm_python as helm
import yaml

# Kinds from CRDs that kubernetes-validate has no schema for; only their shape is checked.
CUSTOM_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest known.
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")


def check(chart_dir, values_file, binary=None):
    """Lints, renders and validates the chart with one values file (None: defaults)."""
    label = values_file or "default values"
    values = None
    if values_file:
        with open(values_file) as f:
            values = yaml.safe_load(f) or {}
    failed = False

    report = helm.lint(chart_dir, values, strict=True)
    for m in report["messages"]:
        print(f"  [lint sev={m['severity']}] {m['path']}: {m['error']}")
    # severity: 1=info, 2=warning, 3=error; strict: warnings fail too.
    if any(m["severity"] >= 2 for m in report["messages"]) or report["errors"]:
        for e in report["errors"]:
            print(f"  [lint error] {e}")
        failed = True

    try:
        rendered = helm.Chart.load(chart_dir).render(values, name="ci", namespace="ci")
    except Exception as e:  # the SDK raises on template errors and `fail`
        print(f"  render failed: {e}")
        return False

    docs, kinds = [], []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            if not text.strip():
                print("  NOTES.txt renders empty")
                failed = True
            continue
        for doc in yaml.safe_load_all(text):
            if not doc:
                continue
            for key in ("apiVersion", "kind", "metadata"):
                if key not in doc:
                    print(f"  {path}: a manifest without {key}")
                    failed = True
            kind = (doc.get("apiVersion"), doc.get("kind"))
            kinds.append(f"{kind[1]}/{doc.get('metadata', {}).get('name')}")
            if kind in CUSTOM_KINDS:
                continue
            docs.append((path, doc))

    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, (path, doc) in enumerate(docs):
            name = os.path.join(tmp, f"{i:02d}-{os.path.basename(path)}")
            with open(name, "w") as f:
                yaml.safe_dump(doc, f, sort_keys=False)
            files.append(name)
        rc = max(
            subprocess.call(["kubernetes-validate", "--strict", "--quiet", "-k", version, *files])
            for version in KUBERNETES_VERSIONS
        ) if files else 0
    if rc != 0:
        failed = True
    if binary:
        manifests = [doc for _, doc in docs]
        if not check_known_to_binary(binary, manifests):
            failed = True
        if values_file is None and not check_notes(binary, rendered, manifests):
            failed = True
        if not check_namespaces_job(binary, manifests, values or {}):
            failed = True
    print(f"  {len(kinds)} manifests ({', '.join(kinds)}); kubernetes-validate rc={rc}")
    print(f"{'FAIL' if failed else 'ok'}: {label}")
    return not failed


def main():
    args = sys.argv[1:]
    binary = None
    if args[:1] == ["--binary"] and len(args) >= 2:
        binary = os.path.abspath(args[1])
        args = args[2:]
    if not args:
        sys.exit(__doc__)
    chart_dir = args[0]
    value_files = args[1:] or sorted(glob.glob(os.path.join(chart_dir, "examples", "*.yaml")))
    results = []
    if binary:
        results.append(check_app_version(chart_dir, binary))
    results += [check(chart_dir, vf, binary) for vf in [None, *value_files]]
    results.append(check_refused(chart_dir))
    sys.exit(0 if all(results) else 1)


# Values the chart must refuse to render, each with a part of the reason it gives.
REFUSED = [
    ({"mode": "postgres"}, "postgres.existingSecret"),
    ({"namespaces": {"create": ["run-a", {"name": "run-a"}]}}, "names a namespace twice"),
    ({"namespaces": {"max": 2, "create": ["run-a", "run-b"]}}, "more than namespaces.max"),
    ({"namespaces": {"create": ["default"]}}, "/namespaces/create/0"),
    ({"namespaces": {"create": ["Run_A"]}}, "/namespaces/create/0"),
    ({"namespaces": {"create": [{"name": "run-a", "spanRetentionAge": "7 days"}]}}, "/namespaces/create/0"),
    ({"namespaces": {"max": 0}}, "/namespaces/max"),
]


def check_refused(chart_dir):
    """Each of REFUSED fails to render, saying why."""
    ok = True
    chart = helm.Chart.load(chart_dir)
    for values, reason in REFUSED:
        try:
            chart.render(values, name="ci", namespace="ci")
        except Exception as e:
            if reason not in str(e):
                print(f"  {values}: refused, but not for its reason ({reason!r}): {e}")
                ok = False
        else:
            print(f"  {values}: rendered; the chart must refuse it ({reason})")
            ok = False
    print(f"{'ok' if ok else 'FAIL'}: {len(REFUSED)} values refused, each for its reason")
    return ok


ENV_NAME = re.compile(r"LIGHTNING_STORE_[A-Z0-9_]+")
_HELP = {}


def help_of(binary, subcommand):
    """`BINARY SUBCOMMAND --help` (SUBCOMMAND: one or more words, `namespaces create`), or None when the
    binary has no such subcommand."""
    if subcommand not in _HELP:
        proc = subprocess.run([binary, *subcommand.split(), "--help"], capture_output=True, text=True)
        _HELP[subcommand] = proc.stdout if proc.returncode == 0 else None
    return _HELP[subcommand]


def subcommands_in(help_text):
    """The subcommands a `--help` lists under `Commands:`."""
    names, listing = set(), False
    for line in (help_text or "").splitlines():
        if line.startswith("Commands:"):
            listing = True
        elif listing and re.match(r"\s{2}[a-z]", line):
            names.add(line.split()[0])
        elif listing and line and not line.startswith(" "):
            listing = False
    return names


def nested(binary, words):
    """The subcommand path that leads `words` (`namespaces create run-a` -> `namespaces create`)."""
    path = words[0]
    for word in words[1:]:
        if word not in subcommands_in(help_of(binary, path)):
            break
        path = f"{path} {word}"
    return path


def check_app_version(chart_dir, binary):
    """Chart.yaml's appVersion, the default image tag, is the binary's version."""
    with open(os.path.join(chart_dir, "Chart.yaml")) as f:
        app_version = str(yaml.safe_load(f)["appVersion"])
    got = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    ok = got == f"lightning-store {app_version}"
    print(f"{'ok' if ok else 'FAIL'}: Chart.yaml appVersion {app_version}; the binary says '{got}'")
    return ok


def pod_specs(manifests):
    """(kind/name, pod spec) of every workload and pod rendered."""
    for doc in manifests:
        spec = doc.get("spec") or {}
        if doc["kind"] == "Pod":
            yield f"Pod/{doc['metadata']['name']}", spec
        elif "template" in spec:
            yield f"{doc['kind']}/{doc['metadata']['name']}", spec["template"]["spec"]


def container_invocations(container, binary=None):
    """(subcommand, flags) of each lightning-store command line a container runs; with the binary, a nested
    subcommand is followed (`namespaces create`)."""
    command = container.get("command") or []
    args = container.get("args") or []
    if command[:1] in (["/bin/sh"], ["sh"]):
        # A shell script: each `lightning-store SUBCOMMAND ... --flag` in it.
        for line in "\n".join(args).splitlines():
            for match in re.finditer(r"lightning-store\s+([a-z][a-z-]*)([^|;&)]*)", line):
                subcommand = match.group(1)
                if binary is not None:
                    words = [subcommand]
                    for word in match.group(2).split():
                        if not re.fullmatch(r"[a-z][a-z-]*", word):
                            break
                        words.append(word)
                    subcommand = nested(binary, words)
                yield subcommand, re.findall(r"(?<![\w-])--[a-z][a-z-]*", match.group(2))
    else:
        argv = [*command[1:], *args] if command else args
        if argv:
            yield argv[0], [a.split("=", 1)[0] for a in argv[1:] if a.startswith("--")]


def check_known_to_binary(binary, manifests):
    """Every LIGHTNING_STORE_* variable and flag the pods get is one the binary documents."""
    configmaps = {d["metadata"]["name"]: d.get("data") or {} for d in manifests if d["kind"] == "ConfigMap"}
    ok = True
    checked = 0
    for where, spec in pod_specs(manifests):
        for container in spec.get("containers", []):
            invocations = list(container_invocations(container, binary))
            helps = []
            for subcommand, flags in invocations:
                text = help_of(binary, subcommand)
                if text is None:
                    print(f"  {where}: `lightning-store {subcommand}` is no subcommand of the binary")
                    ok = False
                    continue
                helps.append(text)
                for flag in flags:
                    checked += 1
                    if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text):
                        print(f"  {where}: `lightning-store {subcommand}` has no flag {flag}")
                        ok = False
            names = [e["name"] for e in container.get("env", [])]
            for source in container.get("envFrom", []):
                ref = source.get("configMapRef")
                if ref:
                    names += list(configmaps.get(ref["name"], {}))
            known = set().union(*(ENV_NAME.findall(t) for t in helps)) if helps else set()
            for name in names:
                if not name.startswith("LIGHTNING_STORE_"):
                    continue
                checked += 1
                if name not in known:
                    commands = ", ".join(sorted({s for s, _ in invocations})) or "none"
                    print(f"  {where}: {name} is documented by none of the commands it runs ({commands})")
                    ok = False
    print(f"  {checked} variables and flags known to {os.path.basename(binary)}: {'yes' if ok else 'NO'}")
    return ok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FAKE_KUBECTL = """#!/bin/sh
# Stand-in for kubectl in the NOTES.txt check: the server already listens on
# the forwarded address, and the Secret's value comes from the rendered chart.
case "$*" in
  "-n $NOTES_NAMESPACE port-forward svc/$NOTES_SERVICE "*) echo "(port-forward: the server is local)" ;;
  "-n $NOTES_NAMESPACE get secret $NOTES_SECRET -o jsonpath={.data.admin-token}") printf %s "$NOTES_ADMIN_TOKEN_B64" ;;
  *) echo "kubectl stand-in: unexpected: kubectl $*" >&2; exit 1 ;;
esac
"""


def check_notes(binary, rendered, manifests):
    """Runs every command NOTES.txt prints against a server set up as the chart sets it up."""
    notes = next(text for path, text in rendered.items() if path.endswith("NOTES.txt"))
    configmap = next(d for d in manifests if d["kind"] == "ConfigMap")
    secrets = [d for d in manifests if d["kind"] == "Secret" and "admin-token" in (d.get("data") or {})]
    workload = next(d for d in manifests if d["kind"] in ("StatefulSet", "Deployment"))
    container = workload["spec"]["template"]["spec"]["containers"][0]
    chart_port = next(p["containerPort"] for p in container["ports"] if p["name"] == "grpc")
    port = free_port()

    commands = []
    for line in notes.splitlines():
        stripped = line.strip()
        if line.startswith("  ") and stripped.split(" ", 1)[0] in ("kubectl", "grpcurl", "lightning-store", "export"):
            commands.append(stripped.replace(f"127.0.0.1:{chart_port}", f"127.0.0.1:{port}"))
    if not commands or not secrets:
        print(f"  NOTES.txt: {len(commands)} commands, {len(secrets)} generated token Secrets")
        return False
    secret = secrets[0]

    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "tokens")
        with open(tokens, "wb") as f:
            f.write(base64.b64decode(secret["data"]["tokens"]))
        env = {k: v for k, v in os.environ.items() if not k.startswith("LIGHTNING_STORE_")}
        env.update(configmap["data"])
        env["LIGHTNING_STORE_LISTEN"] = f"127.0.0.1:{port}"
        env["LIGHTNING_STORE_DATABASE"] = os.path.join(tmp, "notes.db")
        if "LIGHTNING_STORE_METRICS_LISTEN" in env:
            env["LIGHTNING_STORE_METRICS_LISTEN"] = f"127.0.0.1:{free_port()}"
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = item["value"]
            elif "fieldRef" in item:
                env[item["name"]] = f"{workload['metadata']['name']}-0"
        env["LIGHTNING_STORE_TOKENS_FILE"] = tokens
        log = open(os.path.join(tmp, "server.log"), "w+")
        server = subprocess.Popen([binary, *container["args"]], env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            bin_dir = os.path.join(tmp, "bin")
            os.mkdir(bin_dir)
            os.symlink(binary, os.path.join(bin_dir, "lightning-store"))
            with open(os.path.join(bin_dir, "kubectl"), "w") as f:
                f.write(FAKE_KUBECTL)
            os.chmod(os.path.join(bin_dir, "kubectl"), 0o755)
            user_env = {k: v for k, v in os.environ.items() if not k.startswith("LIGHTNING_STORE_")}
            user_env.update(
                PATH=f"{bin_dir}:{os.environ['PATH']}",
                NOTES_NAMESPACE=secret["metadata"].get("namespace", "ci"),
                NOTES_SERVICE=workload["metadata"]["name"],
                NOTES_SECRET=secret["metadata"]["name"],
                NOTES_ADMIN_TOKEN_B64=secret["data"]["admin-token"],
            )
            if shutil.which("grpcurl", path=user_env["PATH"]) is None:
                print("  NOTES.txt: no grpcurl on PATH")
                return False
            token = base64.b64decode(secret["data"]["admin-token"]).decode()
            deadline = time.monotonic() + 30
            while subprocess.call(
                [binary, "stats", "--server", f"http://127.0.0.1:{port}"],
                env={**user_env, "LIGHTNING_STORE_TOKEN": token},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ) != 0:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    print(f"  NOTES.txt: the server with the chart's settings did not start:\n{log.read()}")
                    return False
                time.sleep(0.3)
            script = "set -eu\n" + "".join(f"echo '$ {c}'\n{c}\n" for c in commands)
            proc = subprocess.run(["bash", "-c", script], env=user_env, capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                print(f"  NOTES.txt: a command failed (rc {proc.returncode}):\n{proc.stdout}{proc.stderr}")
                return False
            print(f"  NOTES.txt: {len(commands)} commands ran against a server with the chart's settings:")
            for c in commands:
                print(f"    {c}")
            return True
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
            log.close()



def parse_duration(text):
    """Seconds of a duration as the CLI reads it (`7d`, `12h`, `1h30m`)."""
    units = {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400}
    return sum(float(n) * units[u] for n, u in re.findall(r"([0-9.]+)(us|ms|s|m|h|d)", text))


def check_namespaces_job(binary, manifests, values):
    """Runs the namespaces Job's script as after an install, then an upgrade, against a server with the
    chart's settings: every namespace of `namespaces.create` exists once, with its span retention, and
    both runs exit 0; without a server the script fails, so that Kubernetes retries the pod."""
    jobs = [d for d in manifests if d["kind"] == "Job" and d["metadata"]["name"].endswith("-namespaces")]
    wanted = (values.get("namespaces") or {}).get("create") or []
    if not jobs:
        if wanted:
            print("  namespaces.create is set but no namespaces Job is rendered")
            return False
        return True
    container = jobs[0]["spec"]["template"]["spec"]["containers"][0]
    script = container["args"][0]
    expected = {}
    for item in wanted:
        item = {"name": item} if isinstance(item, str) else item
        age = item.get("spanRetentionAge")
        expected[item["name"]] = (parse_duration(age) if age else None, item.get("spanRetentionMaxBytes"))
    configmap = next(d for d in manifests if d["kind"] == "ConfigMap")
    workload = next(d for d in manifests if d["kind"] in ("StatefulSet", "Deployment"))

    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LIGHTNING_STORE_")}
        env.update(configmap["data"])
        # The chart's settings, on loopback and SQLite in a temporary directory.
        env.update(
            LIGHTNING_STORE_LISTEN=f"127.0.0.1:{port}",
            LIGHTNING_STORE_BACKEND="sqlite",
            LIGHTNING_STORE_DATABASE=os.path.join(tmp, "namespaces.db"),
            LIGHTNING_STORE_SERVER_ID=f"{workload['metadata']['name']}-0",
        )
        if "LIGHTNING_STORE_METRICS_LISTEN" in env:
            env["LIGHTNING_STORE_METRICS_LISTEN"] = f"127.0.0.1:{free_port()}"
        client_env = {k: v for k, v in os.environ.items() if not k.startswith("LIGHTNING_STORE_")}
        bin_dir = os.path.join(tmp, "bin")
        os.mkdir(bin_dir)
        os.symlink(binary, os.path.join(bin_dir, "lightning-store"))
        client_env["PATH"] = f"{bin_dir}:{os.environ['PATH']}"
        if env.get("LIGHTNING_STORE_INSECURE") != "true":
            # An admin token of our own stands for the Secret the Job reads its token from.
            made = subprocess.run([binary, "token", "new", "--role", "admin", "--name", "helm-check"],
                                  capture_output=True, text=True, check=True).stdout.splitlines()
            tokens = os.path.join(tmp, "tokens")
            with open(tokens, "w") as f:
                f.write(made[1] + "\n")
            env["LIGHTNING_STORE_TOKENS_FILE"] = tokens
            client_env["LIGHTNING_STORE_TOKEN"] = made[0]

        def job(server):
            return subprocess.run(["/bin/sh", "-ec", script], env={**client_env, "LIGHTNING_STORE_SERVER": server},
                                  capture_output=True, text=True, timeout=120)

        unreachable = job(f"http://127.0.0.1:{free_port()}")
        if unreachable.returncode == 0:
            print("  namespaces Job: exits 0 with no server to reach (Kubernetes would not retry it)")
            return False
        log = open(os.path.join(tmp, "server.log"), "w+")
        server = subprocess.Popen([binary, *workload["spec"]["template"]["spec"]["containers"][0]["args"]],
                                  env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            address = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while subprocess.call([binary, "stats", "--server", address], env=client_env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    print(f"  namespaces Job: the server with the chart's settings did not start:\n{log.read()}")
                    return False
                time.sleep(0.3)
            for run in ("install", "upgrade"):
                done = job(address)
                if done.returncode != 0:
                    print(f"  namespaces Job, after an {run}: rc {done.returncode}\n{done.stdout}{done.stderr}")
                    return False
                if run == "upgrade":
                    for name in expected:
                        if f"namespace {name} exists already" not in done.stdout:
                            print(f"  namespaces Job, after an upgrade: nothing says {name} was kept:\n{done.stdout}")
                            return False
            listed = subprocess.run([binary, "namespaces", "list", "--json", "--server", address], env=client_env,
                                    capture_output=True, text=True, check=True)
            got = {}
            for summary in yaml.safe_load(listed.stdout):
                retention = summary["namespace"]["span_retention"] or {}
                got[summary["namespace"]["name"]] = (retention.get("max_age_seconds"), retention.get("max_bytes"))
            got.pop("default", None)
            if got != expected:
                print(f"  namespaces Job: the server holds {got}, the values ask for {expected}")
                return False
            print(f"  namespaces Job: created {', '.join(expected)} after an install, kept them after an upgrade, "
                  f"failed (rc {unreachable.returncode}) with no server")
            return True
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
            log.close()

if __name__ == "__main__":
    main()
