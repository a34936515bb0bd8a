// Hugging Face config.json to ModelConfig, for the OPT and Llama families.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "src/core/status.h"
#include "src/model/model_config.h"

namespace strata {

// Reads the config of a Hugging Face model. `model_type` "opt" and "llama" are read in full
// (Llama's rope_scaling "linear" and "llama3" included, also in transformers 5's
// `rope_parameters`); "mistral" is read as Llama when it has no active sliding window. Anything
// else, or a feature the forward pass lacks (OPT-350m's post-LayerNorm/projection, other
// rope_scaling types, other activations), is
// Unsupported with a message naming it; missing or mistyped required fields are Corrupt. `source`
// names the file in messages. The result has passed ModelConfig::Validate().
Result<ModelConfig> ParseHfConfig(const nlohmann::json& config, const std::string& source);

// ReadJsonFile(path) then ParseHfConfig().
Result<ModelConfig> ReadHfConfig(const std::string& path);

}  // namespace strata
