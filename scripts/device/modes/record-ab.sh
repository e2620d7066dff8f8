# The packed recorder_bench (A) against another build of it (RECORD_BENCH_B, a path), each against
# fio on the same 4 volumes in the same repetition, interleaved RECORD_AB_ROUNDS (3) times.
# shellcheck shell=bash disable=SC1091
source "$pack/modes/record.sh"
record_make_volumes 4
for round in $(seq "${RECORD_AB_ROUNDS:-3}"); do
  record_vs_fio "a-$round" 1
  RECORD_BENCH=${RECORD_BENCH_B:?set RECORD_BENCH_B to the other recorder_bench} record_vs_fio "b-$round" 1
done
record_table
