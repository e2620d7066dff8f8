# lanes-rc: see lanes.sh (the receive cores' work a packet, the pipeline against the bare loops).
# shellcheck disable=SC2154 # $pack belongs to run.sh, which sources this
# shellcheck disable=SC1091 # lanes.sh, packed beside this file
source "$pack/modes/lanes.sh"
