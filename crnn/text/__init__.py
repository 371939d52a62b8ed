"""Text as the models see it: the alphabet (``alphabet``), alphabet files as other
projects write them (``alphabet_files``), right-to-left reading order (``bidi``) and the
recognition metrics (``metrics``)."""
