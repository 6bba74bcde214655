// register_version.cpp: what this build of the extension is (`nhbench version`): the
// package version and commit compiled into the core, the libraries it runs on (the version
// each reports at run time, which is the copy actually loaded, and the one its headers had
// at build time) and the build's options.
#include <string>

#include "register.hpp"

extern "C" {
#include "nhb.h"
}

#include <cjson/cJSON.h>
#include <gnutls/gnutls.h>
#include <llhttp.h>
#include <nghttp2/nghttp2.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <openssl/crypto.h>
#include <openssl/opensslv.h>
#include <uv.h>
#include <zlib.h>
#ifdef NHB_HAVE_VECTORSCAN
#include <hs/hs.h>
#endif

#define NHB__STR2(x) #x
#define NHB__STR(x) NHB__STR2(x)
#define NHB__DOTTED(a, b, c) NHB__STR(a) "." NHB__STR(b) "." NHB__STR(c)

namespace {

py::dict library(const char* linked, const char* built) {
  py::dict d;
  d["linked"] = linked ? py::object(py::str(linked)) : py::object(py::none());
  d["built"] = built;
  return d;
}

// hs_version() is "5.4.9 2023-04-19": the number alone, as the other libraries give it.
std::string first_word(const char* text) {
  std::string s(text ? text : "");
  return s.substr(0, s.find(' '));
}

}  // namespace

void register_version(py::module_& m) {
  m.def(
      "build_info",
      []() {
        py::dict libs;
        libs["libuv"] = library(uv_version_string(), NHB__DOTTED(UV_VERSION_MAJOR, UV_VERSION_MINOR, UV_VERSION_PATCH));
        // llhttp has no run-time version call; it is compiled into the extension from source
        // unless a strict system build was found (CMakeLists.txt).
        libs["llhttp"] =
            library(nullptr, NHB__DOTTED(LLHTTP_VERSION_MAJOR, LLHTTP_VERSION_MINOR, LLHTTP_VERSION_PATCH));
        libs["nghttp2"] = library(nghttp2_version(0)->version_str, NGHTTP2_VERSION);
        libs["ngtcp2"] = library(ngtcp2_version(0)->version_str, NGTCP2_VERSION);
        libs["nghttp3"] = library(nghttp3_version(0)->version_str, NGHTTP3_VERSION);
        libs["OpenSSL"] = library(OpenSSL_version(OPENSSL_VERSION_STRING), OPENSSL_VERSION_STR);
        libs["GnuTLS"] = library(gnutls_check_version(nullptr), GNUTLS_VERSION);
        libs["cJSON"] = library(cJSON_Version(),
                                NHB__DOTTED(CJSON_VERSION_MAJOR, CJSON_VERSION_MINOR, CJSON_VERSION_PATCH));
        libs["zlib"] = library(zlibVersion(), ZLIB_VERSION);
#ifdef NHB_HAVE_VECTORSCAN
        libs["Vectorscan"] = library(first_word(hs_version()).c_str(), NHB__DOTTED(HS_MAJOR, HS_MINOR, HS_PATCH));
#endif
        py::dict info;
        info["version"] = nhb_version();
        info["commit"] = nhb_build_commit();
        // HTTP/3 is not optional in CMakeLists.txt: a build without its libraries stops.
        info["http3"] = true;
#ifdef NHB_HAVE_VECTORSCAN
        info["regex_checks"] = true;
#else
        info["regex_checks"] = false;
#endif
        info["sanitizers"] = nhb_build_sanitized() != 0;
        info["werror"] = nhb_build_werror() != 0;
        info["libraries"] = libs;
        return info;
      },
      "What this build is: version, commit, libraries (linked and built-against versions), options.");
}
