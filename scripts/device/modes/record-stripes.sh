# Four volumes: fio with one job per volume, all at once, against recorder_bench's
# BM_StripedWriteVsFio (one lane striped over the four, depth 8 a volume, 4 MiB blocks,
# O_DIRECT, the same page size on both sides: record_huge_pages), in the same run.
# shellcheck shell=bash disable=SC1091
source "$pack/modes/record.sh"
record_make_volumes 4
record_vs_fio stripes 3
record_table
