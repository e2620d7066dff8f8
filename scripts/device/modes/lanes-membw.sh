# lanes-membw: see lanes.sh (the host's memory write rate, dd on 1, 2, 4 … cores).
# shellcheck disable=SC2154 # $pack belongs to run.sh, which sources this
# shellcheck disable=SC1091 # lanes.sh, packed beside this file
source "$pack/modes/lanes.sh"
