// UTF-8 validation (core/utf8.h) against the Unicode Standard's table 3-7 of well-formed
// byte sequences: its boundaries, overlong forms, surrogates and truncated sequences.
#include <gtest/gtest.h>

#include "tensorhub/core/utf8.h"

namespace tensorhub {
namespace {

TEST(Utf8Test, AcceptsWellFormedTextAndPointsAtTheFirstBadByte) {
  EXPECT_FALSE(first_invalid_utf8(""));
  EXPECT_FALSE(first_invalid_utf8(std::string("a\0b", 3)));                       // NUL is well-formed
  EXPECT_FALSE(first_invalid_utf8("caf\xc3\xa9 \xe2\x98\x95 \xf0\x9f\x98\x80"));  // é ☕ 😀
  EXPECT_FALSE(first_invalid_utf8("\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf"));  // U+D7FF, U+E000, U+10FFFF
  EXPECT_EQ(first_invalid_utf8("caf\xe9"), 3u);                                 // Latin-1 é
  EXPECT_EQ(first_invalid_utf8("ab\xc0\xaf"), 2u);                              // overlong '/'
  EXPECT_EQ(first_invalid_utf8("\xe0\x9f\xbf"), 0u);                            // overlong 3-byte
  EXPECT_EQ(first_invalid_utf8("x\xed\xa0\x80"), 1u);                           // surrogate U+D800
  EXPECT_EQ(first_invalid_utf8("\xf4\x90\x80\x80"), 0u);                        // U+110000
  EXPECT_EQ(first_invalid_utf8("ok\xe2\x98"), 2u);                              // truncated at the end
  EXPECT_EQ(first_invalid_utf8("\xe2\x28\xa1"), 0u);                            // bad continuation
  EXPECT_EQ(first_invalid_utf8("\x80"), 0u);                                    // lone continuation
}

}  // namespace
}  // namespace tensorhub
