# lanes-busy: see lanes.sh (the hypervisor's steal with more of the VM's vCPUs busy).
# shellcheck disable=SC2154 # $pack belongs to run.sh, which sources this
# shellcheck disable=SC1091 # lanes.sh, packed beside this file
source "$pack/modes/lanes.sh"
