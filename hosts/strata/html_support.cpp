#include "html_support.hpp"

#include <cstdio>

namespace strata {

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fixed_number(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string mib_text(double bytes) {
  return fixed_number(bytes / (1024.0 * 1024.0), 1) + " MiB";
}

const char* category_color(MemoryCategory category) {
  constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"};
  return kColors[category_index(category) % std::size(kColors)];
}

std::string html_page_start(const std::string& title) {
  return "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>" + html_escape(title) +
         "</title>\n<style>"
         "body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px}"
         "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th:first-child,td:first-child{text-align:left}"
         "td.verdict{text-align:left;max-width:640px}pre{background:#f6f6f6;padding:8px;font-size:12px}"
         ".row{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}</style></head><body>\n";
}

}  // namespace strata
