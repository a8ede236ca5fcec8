// Result/Status: values and errors travel across borders intact.
#include "inference/core/result.h"

#include <gtest/gtest.h>

namespace cubeforge {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return make_error(ErrorCode::kInvalidArgument, "value " + std::to_string(v) + " must be positive");
  return v;
}

Status twice_positive(int v, int* out) {
  CUBEFORGE_ASSIGN_OR_RETURN(int x, parse_positive(v));
  *out = 2 * x;
  return ok_status();
}

TEST(Result, CarriesValueOrError) {
  auto good = parse_positive(3);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  auto bad = parse_positive(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().to_string(), "invalid argument: value -1 must be positive");
}

TEST(Result, PropagatesThroughMacros) {
  int out = 0;
  EXPECT_TRUE(twice_positive(4, &out).ok());
  EXPECT_EQ(out, 8);
  Status s = twice_positive(0, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("must be positive"), std::string::npos);
}

}  // namespace
}  // namespace cubeforge
