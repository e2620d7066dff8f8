# streams: the GPU tests of the stages' own CUDA streams and events, then link_bench and
# fft_gpu_bench; a table last (modes/README.md says what each part shows).
streams_table=()
for test in gpu_stream_test memory_gpu_test record_gpu_test fft_gpu_test fft_gpu_kernels_test fft_complex_kernels_test; do
  if [ ! -x "$pack/bin/$test" ]; then
    streams_table+=("$test|not packed"); status=1; continue
  fi
  echo "===== $test" >> "$out/streams-tests.log"
  if timeout 400 "$pack/bin/$test" > "$out/streams-$test.log" 2>&1; then result=PASS; else result=FAIL; status=1; fi
  cat "$out/streams-$test.log" >> "$out/streams-tests.log"
  skips=$(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$out/streams-$test.log")
  streams_table+=("$test|$result ($skips skipped)")
done
grep -B2 -A12 'Failure' "$out/streams-tests.log" | tail -40
if [ -x "$pack/bin/link_bench" ]; then bench link_bench; fi
if [ -x "$pack/bin/fft_gpu_bench" ]; then bench fft_gpu_bench; grep -E 'BM_.*(ratio|GBps)' "$out/bench.log" | grep -v _mean | tail -12; fi
echo
echo "== streams: summary"
printf '%-28s %s\n' test result
for row in "${streams_table[@]}"; do printf '%-28s %s\n' "${row%%|*}" "${row#*|}"; done
grep -h '^stage copies, GPU clock' "$out/streams-gpu_stream_test.log" 2>/dev/null || echo "overlap: no timing line (see streams-gpu_stream_test.log)"
grep -h '^record bounce copies' "$out/streams-record_gpu_test.log" 2>/dev/null || echo "record bounce copies: no line (see streams-record_gpu_test.log)"
