#!/usr/bin/env python3
"""Checks a Helm chart without a helm binary: `helm lint --strict`, `helm template`,
then validates every rendered manifest against the Kubernetes schemas.

Usage: helm_check.py CHART_DIR [VALUES.yaml ...]
  Checks the chart with its default values, then with each values file given
  (default: every CHART_DIR/examples/*.yaml). Exits 1 when anything fails.
Needs: pip install helm-python-sdk==0.2.2 kubernetes-validate==1.37.0
"""
import glob
import os
import subprocess
import sys
import tempfile

import helm_python as helm
import yaml

# Kinds from CRDs that kubernetes-validate has no schema for; only their shape is checked.
CUSTOM_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest known.
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")


def check(chart_dir, values_file):
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
    print(f"  {len(kinds)} manifests ({', '.join(kinds)}); kubernetes-validate rc={rc}")
    print(f"{'FAIL' if failed else 'ok'}: {label}")
    return not failed


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    chart_dir = sys.argv[1]
    value_files = sys.argv[2:] or sorted(glob.glob(os.path.join(chart_dir, "examples", "*.yaml")))
    results = [check(chart_dir, vf) for vf in [None, *value_files]]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
