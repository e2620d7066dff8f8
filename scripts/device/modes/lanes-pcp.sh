# lanes-pcp: see lanes.sh (the page-list sub-mode of the multi-lane ladder).
# shellcheck disable=SC2154 # $pack belongs to run.sh, which sources this
# shellcheck disable=SC1091 # lanes.sh, packed beside this file
source "$pack/modes/lanes.sh"
