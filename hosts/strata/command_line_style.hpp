#pragma once
#include <boost/program_options/cmdline.hpp>

namespace strata {

// Boost's default style, without guessing: a prefix of an option is not taken for the option
// (`--force` must not mean `--force-resume`, nor `--metric` mean `--metrics`).
inline constexpr int kCommandLineStyle = boost::program_options::command_line_style::default_style &
                                         ~boost::program_options::command_line_style::allow_guessing;

}  // namespace strata
