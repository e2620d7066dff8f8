# lanes-ab: see lanes.sh (a change against the build before it, in one call).
# shellcheck disable=SC2154 # $pack belongs to run.sh, which sources this
# shellcheck disable=SC1091 # lanes.sh, packed beside this file
source "$pack/modes/lanes.sh"
