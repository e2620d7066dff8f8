# placement: lanes on GPUs on a multi-GPU host: sysfs and nvidia-smi placement, the placement and
# cross-GPU link tests, then configs/four_lane_two_gpu.yaml for 8 s (modes/README.md).
nvidia-smi --query-gpu=index,pci.bus_id,name --format=csv,noheader | tee "$out/placement-gpus.txt"
while IFS=', ' read -r index bus _; do
  bus_lower=$(tr 'A-F' 'a-f' <<<"${bus#0000}")
  echo "GPU $index $bus_lower numa_node $(cat "/sys/bus/pci/devices/$bus_lower/numa_node" 2>/dev/null || echo '?')"
done < <(nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader) | tee -a "$out/placement-gpus.txt"
for nic in /sys/class/net/*; do
  echo "NIC ${nic##*/} $(readlink -f "$nic/device" 2>/dev/null || echo '(no device)')"
done | tee -a "$out/placement-gpus.txt"
nvidia-smi topo -m > "$out/placement-topo.txt" 2>&1 || true
for test in gpu_placement_test config_test local_link_gpu_test; do
  echo "===== $test" >> "$out/placement-tests.log"
  if timeout 300 "$pack/bin/$test" >> "$out/placement-tests.log" 2>&1; then echo "PASS $test"; else echo "FAIL $test"; status=1; fi
done
grep -E '^\[  (SKIPPED|FAILED) \]|Failure' -A3 "$out/placement-tests.log" | head -30
"$pack/bin/sluice" validate "$pack/configs/four_lane_two_gpu.yaml" | tee "$out/placement-validate.txt" || status=1
rm -rf /tmp/sluice-four-lane
"$pack/bin/sluice" run "$pack/configs/four_lane_two_gpu.yaml" -q --report "$out/placement-run.json" \
  2> "$out/placement-run.log" > /dev/null || status=1
grep -E 'lane port[0-9]: (GPU|no GPU)' "$out/placement-run.log" | head -4
python3 - "$out/placement-run.json" <<'PY' || status=1
import json, sys
report = json.load(open(sys.argv[1]))
print(f"{'lane':<7}{'GPU':>4} {'bus id':<14}{'packets':>10}{'lost':>8}{'rows':>8}  why")
bad = 0
for lane in report["lanes"]:
    stages, gpu = lane["stages"], lane["gpu"]
    lost = stages[0]["counters"].get("lost_samples", 0)
    rows = next((s["counters"].get("rows", 0) for s in stages if s["name"] == "fft"), 0)
    bad += lost != 0 or rows == 0
    print(f"{lane['name']:<7}{gpu['index']:>4} {gpu['pci_bus_id']:<14}{stages[0]['packets']:>10}{lost:>8}{rows:>8}  {gpu['reason']}")
per_gpu = {}
for lane in report["lanes"]:
    per_gpu[lane["gpu"]["index"]] = per_gpu.get(lane["gpu"]["index"], 0) + 1
print("lanes per GPU:", ", ".join(f"GPU {g}: {n}" for g, n in sorted(per_gpu.items())))
sys.exit(1 if bad else 0)
PY
