// Where threads run: the cores a thread may use and pinning one to a set of cores. Every
// library pins through here, so each failure reads the same.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace sluice {

// The cores in `set`, ascending.
std::vector<int> cores_in(const cpu_set_t& set);

// The cores `task` may run on (0: the calling thread; getpid(): the main thread, the process's own
// even when the caller is pinned narrower), ascending. Throws naming sched_getaffinity.
std::vector<int> allowed_cores(pid_t task = 0);

// Pins `thread` to `cores` (one outside 0..CPU_SETSIZE-1 is left out, so none left is EINVAL).
// Throws "pthread_setaffinity_np (which): strerror" ("pthread_setaffinity_np: ..." without `which`).
void pin_thread(pthread_t thread, const std::vector<int>& cores, const std::string& which = {});

}  // namespace sluice
