#!/usr/bin/env python3
"""Generate instance_types.tsv, the embedded EC2 catalog, from the shared reference CSV.

Usage:
    generate.py [CSV] [--out TSV]   write the TSV
    generate.py [CSV] --check       exit 1 if the committed TSV differs from what would be written

CSV defaults to the first `shared/data/ec2-instance-types-us-east-1.csv` found in the repository
root's parent or any directory above it (CI clones the repo with `shared/` beside it; developer
worktrees sit one level deeper), or `$DOVETAIL_SHARED_DATA/ec2-instance-types-us-east-1.csv`.

The TSV keeps only what the catalog and the overhead model read, so the Rust side never touches
`../shared` at run time and parses one small file with `include_str!`. Python 3 stdlib only.
"""

import argparse
import csv
import difflib
import io
import os
import sys
from pathlib import Path

CSV_NAME = "ec2-instance-types-us-east-1.csv"
HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[3]  # shared/core/src/catalog -> repo root
DEFAULT_OUT = HERE / "instance_types.tsv"

# Output columns, in order. embedded.rs checks the header against its own copy of this list.
COLUMNS = [
    "name",
    "category",
    "family",
    "generation",
    "size",
    "hypervisor",
    "arch",
    "vcpu",
    "memory_mib",
    "cpu_manufacturer",
    "capability_flex",
    "network_bandwidth_mbps",
    "ebs_bandwidth_mbps",
    "encryption_in_transit",
    "local_nvme_gb",
    "gpu_name",
    "gpu_manufacturer",
    "gpu_count",
    "gpu_memory_mib",
    "max_enis",
    "ipv4_per_eni",
    "pod_eni",
    "efa",
    "nvidia_gpu",
    "amd_gpu",
    "neuron",
    "neuroncore",
    "od_price",
    "spot_savings_pct",
    "spot_band",
]

# The CSV has no ENI limits for these types. Values are DescribeInstanceTypes' NetworkInfo:
# (ENIs on the default network card, IPv4 addresses per ENI). Without them the model would fall
# back to 110 pods, which overstates what the VPC CNI can address on these nodes.
NETWORK_FILL = {
    "hpc6a.48xlarge": (2, 50),
    "hpc6id.32xlarge": (1, 50),
    "hpc7a.12xlarge": (2, 50),
    "hpc7a.24xlarge": (2, 50),
    "hpc7a.48xlarge": (2, 50),
    "hpc7a.96xlarge": (2, 50),
    "hpc8a.96xlarge": (2, 50),
    "trn2.48xlarge": (2, 50),
}


class DataError(Exception):
    pass


def find_csv():
    tried = []
    env = os.environ.get("DOVETAIL_SHARED_DATA")
    if env:
        p = Path(env) / CSV_NAME
        tried.append(p)
        if p.is_file():
            return p, tried
    for ancestor in REPO_ROOT.parents:
        p = ancestor / "shared" / "data" / CSV_NAME
        tried.append(p)
        if p.is_file():
            return p, tried
    return None, tried


def integer(row, col, required=True):
    v = row[col].strip()
    if v == "":
        if required:
            raise DataError(f"{row['instance_type']}: {col} is empty")
        return ""
    try:
        n = int(v)
    except ValueError:
        raise DataError(f"{row['instance_type']}: {col}={v!r} is not an integer") from None
    if n < 0:
        raise DataError(f"{row['instance_type']}: {col}={v!r} is negative")
    return str(n)


def number(row, col):
    v = row[col].strip()
    if v == "":
        return ""
    try:
        f = float(v)
    except ValueError:
        raise DataError(f"{row['instance_type']}: {col}={v!r} is not a number") from None
    if not f >= 0:
        raise DataError(f"{row['instance_type']}: {col}={v!r} is negative")
    # Keep the published digits: repr(float) could print 0.1 + noise differently across versions.
    return v


def boolean(row, col):
    v = row[col].strip().lower()
    if v not in ("true", "false"):
        raise DataError(f"{row['instance_type']}: {col}={row[col]!r} is not true/false")
    return v


def cni_enis(row):
    """ENIs the VPC CNI can use, and IPv4 addresses per ENI.

    The CNI only attaches ENIs on the default network card, but the CSV's max_enis is the total
    over all cards (DescribeInstanceTypes' MaximumNetworkInterfaces). Multi-card types split their
    ENIs evenly across cards, so the default card's share is recovered from the published ENI-limited
    max pods; anything that is not an exact even split is rejected rather than guessed.
    """
    name = row["instance_type"]
    published = int(row["karpenter_max_pods"])
    if row["max_enis"].strip() == "":
        if name not in NETWORK_FILL:
            raise DataError(f"{name}: no ENI data in the CSV and none in NETWORK_FILL")
        enis, ipv4 = NETWORK_FILL[name]
        if enis * (ipv4 - 1) + 2 != published:
            raise DataError(f"{name}: NETWORK_FILL {enis}x{ipv4} disagrees with published max pods {published}")
        return enis, ipv4
    total = int(integer(row, "max_enis"))
    ipv4 = int(integer(row, "ipv4_per_eni"))
    if ipv4 < 2:
        raise DataError(f"{name}: ipv4_per_eni={ipv4} leaves no address for pods")
    if total * (ipv4 - 1) + 2 == published:
        return total, ipv4
    per_card, rest = divmod(published - 2, ipv4 - 1)
    if rest != 0 or per_card <= 0 or total % per_card != 0:
        raise DataError(
            f"{name}: published max pods {published} is not an even split of {total} ENIs x {ipv4} IPv4 "
            "over network cards"
        )
    return per_card, ipv4


def convert(row):
    name = row["instance_type"].strip()
    if not name or any(c in name for c in "\t\n"):
        raise DataError(f"bad instance type name {name!r}")
    if row["arch"] not in ("amd64", "arm64"):
        raise DataError(f"{name}: arch={row['arch']!r}")
    if row["hypervisor"] not in ("nitro", "xen", ""):
        raise DataError(f"{name}: hypervisor={row['hypervisor']!r}")
    od = number(row, "od_price_usd_per_h")
    savings = number(row, "spot_savings_pct")
    band = row["spot_interruption_band"].strip()
    if band not in ("", "0", "1", "2", "3", "4"):
        raise DataError(f"{name}: spot_interruption_band={band!r}")
    if (band == "") != (savings == ""):
        raise DataError(f"{name}: spot savings and band must both be present or both absent")
    if savings and not float(savings) < 100:
        raise DataError(f"{name}: spot savings {savings}% would make spot free")
    gpu_name = row["gpu_name"].strip()
    enis, ipv4 = cni_enis(row)
    out = {
        "name": name,
        "category": row["category"].strip(),
        "family": row["family"].strip(),
        "generation": integer(row, "generation"),
        "size": row["size"].strip(),
        "hypervisor": row["hypervisor"],
        "arch": row["arch"],
        "vcpu": integer(row, "vcpu"),
        "memory_mib": integer(row, "memory_mib"),
        "cpu_manufacturer": row["cpu_manufacturer"].strip().lower(),
        "capability_flex": boolean(row, "capability_flex"),
        "network_bandwidth_mbps": integer(row, "network_bandwidth_mbps", required=False),
        "ebs_bandwidth_mbps": integer(row, "ebs_bandwidth_mbps", required=False),
        "encryption_in_transit": boolean(row, "encryption_in_transit"),
        "local_nvme_gb": integer(row, "local_nvme_gb", required=False),
        # Karpenter's label values are lower-kebab-case ("a10g", "rtx-pro-4500").
        "gpu_name": gpu_name.lower().replace(" ", "-"),
        "gpu_manufacturer": row["gpu_manufacturer"].strip().lower().replace(" ", "-"),
        "gpu_count": integer(row, "gpu_count", required=bool(gpu_name)),
        "gpu_memory_mib": integer(row, "gpu_memory_mib", required=bool(gpu_name)),
        "max_enis": str(enis),
        "ipv4_per_eni": str(ipv4),
        "pod_eni": integer(row, "res_pod_eni", required=False),
        "efa": integer(row, "res_efa", required=False),
        "nvidia_gpu": integer(row, "res_nvidia_gpu", required=False),
        "amd_gpu": integer(row, "res_amd_gpu", required=False),
        "neuron": integer(row, "res_neuron", required=False),
        "neuroncore": integer(row, "res_neuroncore", required=False),
        "od_price": od,
        "spot_savings_pct": savings,
        "spot_band": band,
    }
    for col in ("category", "family", "size", "cpu_manufacturer"):
        if not out[col]:
            raise DataError(f"{name}: {col} is empty")
    for col, v in out.items():
        if "\t" in v or "\n" in v:
            raise DataError(f"{name}: {col} contains a tab or newline")
    return out


def generate(csv_path):
    with open(csv_path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise DataError(f"{csv_path} has no rows")
    seen = set()
    buf = io.StringIO()
    buf.write(f"# Generated by generate.py from {CSV_NAME} ({len(rows)} types). Do not edit by hand.\n")
    buf.write("# max_enis counts only the default network card's ENIs: the VPC CNI uses no other.\n")
    buf.write("\t".join(COLUMNS) + "\n")
    for row in sorted(rows, key=lambda r: r["instance_type"]):
        out = convert(row)
        if out["name"] in seen:
            raise DataError(f"{out['name']} appears twice")
        seen.add(out["name"])
        buf.write("\t".join(out[c] for c in COLUMNS) + "\n")
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="?", help=f"path to {CSV_NAME}")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="TSV to write or check")
    ap.add_argument("--check", action="store_true", help="fail if the TSV is not up to date")
    args = ap.parse_args()

    if args.csv:
        csv_path = Path(args.csv)
        if not csv_path.is_file():
            print(f"generate.py: {csv_path} does not exist", file=sys.stderr)
            return 2
    else:
        csv_path, tried = find_csv()
        if csv_path is None:
            print(
                f"generate.py: cannot find {CSV_NAME}; looked in:\n  "
                + "\n  ".join(str(p) for p in tried)
                + "\npass its path as an argument or set DOVETAIL_SHARED_DATA to its directory",
                file=sys.stderr,
            )
            return 2
    try:
        text = generate(csv_path)
    except DataError as e:
        print(f"generate.py: {csv_path}: {e}", file=sys.stderr)
        return 2

    out = Path(args.out)
    if args.check:
        current = out.read_text(encoding="utf-8") if out.is_file() else ""
        if current == text:
            print(f"generate.py: {out.name} is up to date with {csv_path}")
            return 0
        diff = list(
            difflib.unified_diff(
                current.splitlines(), text.splitlines(), f"{out.name} (committed)", f"{out.name} (generated)", lineterm=""
            )
        )
        shown = "\n".join(diff[:40]) + ("\n..." if len(diff) > 40 else "")
        print(
            f"generate.py: {out} is out of date with {csv_path} ({len(diff)} diff lines).\n"
            f"Regenerate it with: python3 {os.path.relpath(__file__, REPO_ROOT)}\n{shown}",
            file=sys.stderr,
        )
        return 1
    out.write_text(text, encoding="utf-8")
    print(f"generate.py: wrote {out} ({text.count(chr(10)) - 3} types)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
