# lanes-standby: see lanes.sh (soaks taking turns without and with a standby receive thread a lane).
# shellcheck disable=SC2154 # $pack belongs to run.sh, which sources this
# shellcheck disable=SC1091 # lanes.sh, packed beside this file
source "$pack/modes/lanes.sh"
