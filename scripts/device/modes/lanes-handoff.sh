# lanes-handoff: see lanes.sh (what each part of the placing thread's work costs the receive core).
# shellcheck disable=SC2154 # $pack belongs to run.sh, which sources this
# shellcheck disable=SC1091 # lanes.sh, packed beside this file
source "$pack/modes/lanes.sh"
