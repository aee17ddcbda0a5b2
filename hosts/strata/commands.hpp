#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace strata {

// Each command parses its own arguments (after the command word) and returns an exit code.
int command_train(const std::vector<std::string>& arguments);
int command_eval(const std::vector<std::string>& arguments);
int command_export(const std::vector<std::string>& arguments);
int command_validate(const std::vector<std::string>& arguments);
int command_plugins(const std::vector<std::string>& arguments);
int command_plan(const std::vector<std::string>& arguments);
int command_ab(const std::vector<std::string>& arguments);  // ab_command.cpp
// Refuses (ManifestError, naming `option`) an output path that is a directory, a device or a pipe,
// or whose directory cannot be created and written; creates that directory.
void check_output_file(const std::string& option, const std::filesystem::path& path);

int command_verify(const std::vector<std::string>& arguments);     // verify_command.cpp
int command_prepare(const std::vector<std::string>& arguments);    // prepare_command.cpp
int command_generate(const std::vector<std::string>& arguments);   // generate_command.cpp
int command_calibrate(const std::vector<std::string>& arguments);  // calibrate_command.cpp

}  // namespace strata
