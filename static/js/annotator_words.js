/* The words the scoring page's scripts say to the annotator, in the page's language: the
 * page's JSON block (annotation/templatetags/annotator_words.py, rendered as
 * #annotate-strings); English where the page has none. Loaded before the scripts that use
 * it (window.flaskwebWord(key, english, {name: value})). */
(function () {
  "use strict";

  var WORDS = null;
  window.flaskwebWord = function (key, english, values) {
    if (WORDS === null) {
      var el = document.getElementById("annotate-strings");
      try { WORDS = el ? JSON.parse(el.textContent) : {}; } catch (err) { WORDS = {}; }
    }
    var text = WORDS[key] || english;
    Object.keys(values || {}).forEach(function (name) {
      text = text.split("{" + name + "}").join(String(values[name]));
    });
    return text;
  };
})();
