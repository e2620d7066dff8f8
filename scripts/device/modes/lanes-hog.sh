# lanes-hog: see lanes.sh (the bare loops beside memory traffic on the placing cores).
# shellcheck disable=SC2154 # $pack belongs to run.sh, which sources this
# shellcheck disable=SC1091 # lanes.sh, packed beside this file
source "$pack/modes/lanes.sh"
