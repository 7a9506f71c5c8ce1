# The web chat page, assembled at configure time into one HTML text that the server compiles in
# as a raw string (generated/chat_page.inc): the page's own HTML, CSS and JS (src/app/server/) and
# Debian's packaged marked, highlight.js and DOMPurify, inlined so that the page fetches nothing.
#
#   edgevl_web_page(<output .inc>)   sets EDGEVL_PAGE_BYTES (the assembled page's size)

set(EDGEVL_PAGE_DIR ${CMAKE_SOURCE_DIR}/src/app/server)
# The page's own scripts, in the order they run (after the libraries).
set(EDGEVL_PAGE_SCRIPTS chat_markdown.js chat_images.js chat.js)
# highlight.js: Debian ships only the build with all 185 languages (846 kB); these cover what
# chat replies mostly hold, at ~87 kB. A fence with another language is shown unhighlighted.
set(EDGEVL_PAGE_HLJS_LANGUAGES bash shell cpp cs css diff go java javascript json kotlin lua
  makefile markdown php plaintext python ruby rust sql swift typescript xml yaml cmake dockerfile ini)

# A file of a Debian package, or a configure error that names the package to install.
function(_edgevl_page_package_file var package path)
  if(NOT EXISTS ${path})
    message(FATAL_ERROR "The web chat page needs ${path} from the Debian package '${package}': "
      "apt-get install ${package} (scripts/setup.sh installs it)")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${path})
  file(READ ${path} text)
  set(${var} "${text}" PARENT_SCOPE)
endfunction()

# highlight.js's core plus the chosen languages. The minified build is the core followed by one
# `hljs.registerLanguage("name",function(hljs){...});` statement per language.
function(_edgevl_page_hljs var)
  _edgevl_page_package_file(all libjs-highlight.js /usr/share/javascript/highlight.js/highlight.min.js)
  set(mark "hljs.registerLanguage(\"")
  string(LENGTH "${mark}" mark_len)
  string(FIND "${all}" "${mark}" first)
  if(first EQUAL -1)
    message(FATAL_ERROR "highlight.min.js has no registerLanguage statements: not the 9.x build "
      "this page expects")
  endif()
  string(SUBSTRING "${all}" 0 ${first} out)
  foreach(lang ${EDGEVL_PAGE_HLJS_LANGUAGES})
    string(FIND "${all}" "${mark}${lang}\"," at)
    if(at EQUAL -1)
      message(FATAL_ERROR "highlight.min.js does not register the language '${lang}'")
    endif()
    string(SUBSTRING "${all}" ${at} -1 rest)
    string(SUBSTRING "${rest}" ${mark_len} -1 after)
    string(FIND "${after}" "${mark}" next)
    if(next EQUAL -1)
      string(APPEND out "${rest}")
    else()
      math(EXPR len "${next} + ${mark_len}")
      string(SUBSTRING "${rest}" 0 ${len} one)
      string(APPEND out "${one}")
    endif()
  endforeach()
  set(${var} "${out}" PARENT_SCOPE)
endfunction()

# One inline <script>. The HTML parser ends a script at the first `</script`, and `<!--` followed
# by `<script` inside one changes where it ends: refuse both rather than ship a broken page.
function(_edgevl_page_script var name text)
  string(TOLOWER "${text}" lower)
  string(FIND "${lower}" "</script" close)
  string(FIND "${lower}" "<!--" comment)
  string(FIND "${lower}" "<script" open)
  if(NOT close EQUAL -1 OR (NOT comment EQUAL -1 AND NOT open EQUAL -1))
    message(FATAL_ERROR "${name} holds `</script` (or `<!--` and `<script`): it cannot be inlined "
      "in a <script> element")
  endif()
  # A source map is fetched when developer tools open: the page fetches nothing.
  string(REGEX REPLACE "\n//# sourceMappingURL=[^\n]*" "\n" text "${text}")
  set(${var} "<script>/* ${name} */\n${text}\n</script>" PARENT_SCOPE)
endfunction()

function(edgevl_web_page out)
  foreach(f chat.html chat.css ${EDGEVL_PAGE_SCRIPTS})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${EDGEVL_PAGE_DIR}/${f})
  endforeach()
  file(READ ${EDGEVL_PAGE_DIR}/chat.html page)
  file(READ ${EDGEVL_PAGE_DIR}/chat.css css)

  _edgevl_page_package_file(marked libjs-marked /usr/share/javascript/marked/marked.umd.min.js)
  _edgevl_page_package_file(purify node-dompurify /usr/share/nodejs/dompurify/dist/purify.min.js)
  _edgevl_page_hljs(hljs)
  # Code colours: GitHub's light theme, Atom One Dark when the system is dark (as the page is).
  _edgevl_page_package_file(hl_light libjs-highlight.js /usr/share/javascript/highlight.js/styles/github.css)
  _edgevl_page_package_file(hl_dark libjs-highlight.js /usr/share/javascript/highlight.js/styles/atom-one-dark.css)

  _edgevl_page_script(s_marked "marked (libjs-marked)" "${marked}")
  _edgevl_page_script(s_hljs "highlight.js (libjs-highlight.js)" "${hljs}")
  _edgevl_page_script(s_purify "DOMPurify (node-dompurify)" "${purify}")
  set(scripts "${s_marked}\n${s_hljs}\n${s_purify}")
  foreach(f ${EDGEVL_PAGE_SCRIPTS})
    file(READ ${EDGEVL_PAGE_DIR}/${f} js)
    _edgevl_page_script(s ${f} "${js}")
    string(APPEND scripts "\n${s}")
  endforeach()
  string(FIND "${css}${hl_light}${hl_dark}" "</style" bad)
  if(NOT bad EQUAL -1)
    message(FATAL_ERROR "the page's CSS holds `</style`")
  endif()
  set(style "<style>\n${hl_light}\n@media (prefers-color-scheme: dark) {\n${hl_dark}\n}\n${css}</style>")

  foreach(marker EDGEVL_STYLE EDGEVL_SCRIPTS)
    string(FIND "${page}" "<!-- @${marker}@ -->" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "chat.html lacks the marker <!-- @${marker}@ -->")
    endif()
  endforeach()
  string(REPLACE "<!-- @EDGEVL_STYLE@ -->" "${style}" page "${page}")
  string(REPLACE "<!-- @EDGEVL_SCRIPTS@ -->" "${scripts}" page "${page}")

  string(FIND "${page}" ")edgevlpage\"" end)
  if(NOT end EQUAL -1)
    message(FATAL_ERROR "the assembled web page holds the raw-string terminator )edgevlpage\" "
      "that chat_page.inc wraps it in")
  endif()
  string(LENGTH "${page}" bytes)
  set(EDGEVL_PAGE_BYTES ${bytes} PARENT_SCOPE)
  # Copied only when changed, so that an unrelated reconfigure does not recompile the server.
  file(WRITE ${out}.tmp "R\"edgevlpage(${page})edgevlpage\"\n")
  configure_file(${out}.tmp ${out} COPYONLY)
endfunction()
