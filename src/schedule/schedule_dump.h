// Text form of a BlockSchedule for `--dump-schedule` and for people reading a test failure.
#pragma once

#include <string>

#include "src/schedule/block_schedule.h"

namespace strata {

// One line per step, e.g.
//   #17   load     load_cache         token 1  layer 3 attention.1  mb 1  slot 0  waits #12 #15
// preceded by a header with the shape and counts of steps per lane.
std::string DumpSchedule(const BlockSchedule& schedule);

}  // namespace strata
