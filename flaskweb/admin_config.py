"""The Django admin app with flaskweb's admin site as the default `admin.site`, so its login
is throttled like /login/ (flaskweb.security.ThrottledAdminSite). Listed in INSTALLED_APPS
instead of "django.contrib.admin"; kept apart from the site class because an AppConfig's
module is imported before the models, which the admin's login form needs."""

from django.contrib.admin.apps import AdminConfig


class ThrottledAdminConfig(AdminConfig):
    default_site = "flaskweb.security.ThrottledAdminSite"
