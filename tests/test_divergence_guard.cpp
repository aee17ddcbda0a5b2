// The divergence guard: a finite blow-up and a non-finite streak both stop a run, one bad step
// does not, and factor 0 turns the finite check off.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/training/divergence_guard.hpp"

namespace strata {
namespace {

TEST(DivergenceGuard, StopsAfterStepsInARowAboveFactorTimesTheBest) {
  DivergenceGuard guard({10.0, 3, 8});
  EXPECT_FALSE(guard.observe(1, 5.0));
  EXPECT_FALSE(guard.observe(2, 2.0));  // best: 2
  EXPECT_FALSE(guard.observe(3, 25.0));
  EXPECT_FALSE(guard.observe(4, 30.0));
  const auto reason = guard.observe(5, 40.0);
  ASSERT_TRUE(reason);
  EXPECT_NE(reason->find("at step 5"), std::string::npos) << *reason;
  EXPECT_NE(reason->find("above 10 x its best (2) for 3 steps"), std::string::npos) << *reason;
}

TEST(DivergenceGuard, AStepBackUnderTheLimitRestartsTheCount) {
  DivergenceGuard guard({10.0, 3, 8});
  EXPECT_FALSE(guard.observe(1, 1.0));
  EXPECT_FALSE(guard.observe(2, 11.0));
  EXPECT_FALSE(guard.observe(3, 12.0));
  EXPECT_FALSE(guard.observe(4, 10.0));  // exactly factor x best is not above it
  EXPECT_FALSE(guard.observe(5, 11.0));
  EXPECT_FALSE(guard.observe(6, 11.0));
  EXPECT_TRUE(guard.observe(7, 11.0));
}

TEST(DivergenceGuard, FactorZeroNeverStopsAFiniteRun) {
  DivergenceGuard guard({0.0, 1, 8});
  EXPECT_FALSE(guard.observe(1, 1.0));
  for (int step = 2; step < 50; ++step) EXPECT_FALSE(guard.observe(step, 1e30));
}

TEST(DivergenceGuard, NonFiniteStreakStopsEvenWithFactorZero) {
  DivergenceGuard guard({0.0, 1, 2});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(guard.observe(1, 3.0));
  EXPECT_FALSE(guard.observe(2, nan));
  EXPECT_FALSE(guard.observe(3, 3.0));  // a finite step ends the streak
  EXPECT_FALSE(guard.observe(4, std::numeric_limits<double>::infinity()));
  const auto reason = guard.observe(5, nan);
  ASSERT_TRUE(reason);
  EXPECT_NE(reason->find("non-finite for 2 steps in a row"), std::string::npos) << *reason;
}

TEST(DivergenceGuard, AlternatingNonFiniteAndHugeLossesStillStop) {
  DivergenceGuard guard({10.0, 3, 8});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(guard.observe(1, 1.0));
  EXPECT_FALSE(guard.observe(2, 50.0));
  EXPECT_FALSE(guard.observe(3, nan));
  EXPECT_FALSE(guard.observe(4, 50.0));
  EXPECT_FALSE(guard.observe(5, nan));
  EXPECT_TRUE(guard.observe(6, 50.0)) << "three huge finite losses, with NaNs between them";
}

}  // namespace
}  // namespace strata
