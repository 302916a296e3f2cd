// Reading TF Serving's text-format configuration files with protobuf's TextFormat.
#pragma once

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>

#include <string>

#include "tensorhub/core/error.h"

namespace tensorhub {

/// Parses `text` into `message`. Throws InvalidArgument naming `what` (e.g.
/// "--model_config_file"), the message type, and each error's line and column.
inline void parse_text_proto(const std::string& text, google::protobuf::Message* message, const std::string& what) {
  class Errors : public google::protobuf::io::ErrorCollector {
   public:
    void AddError(int line, int column, const std::string& error) override {
      // protobuf names the token it found, which at the end of the text is empty.
      const std::string what = error.ends_with("got: ") ? error + "the end of the file" : error;
      text += (text.empty() ? "" : "; ") + ("line " + std::to_string(line + 1) + ", column " +
                                             std::to_string(column + 1) + ": " + what);
    }
    std::string text;
  } errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, message))
  {
    // Our copies of TF Serving's config messages live in package tensorhub.serving; users know
    // them by TF Serving's names.
    std::string type = message->GetTypeName();
    if (type.starts_with("tensorhub.serving.")) type = "tensorflow.serving." + type.substr(18);
    throw InvalidArgument(what + " is not a valid " + type + " text proto: " + errors.text);
  }
}

}  // namespace tensorhub
