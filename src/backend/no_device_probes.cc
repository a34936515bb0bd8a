#include "src/backend/device_probes.h"

namespace strata::profile {

std::optional<DeviceRates> MeasureDevice(std::string* why) {
  *why = "this build has no CUDA backend";
  return std::nullopt;
}

}  // namespace strata::profile
