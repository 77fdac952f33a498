"""A Website custom resource with a defaulting and a validating webhook: the defaulter fills in the
image and replicas; the validator caps replicas, warns about ``:latest`` images, keeps the
domain unchanged once set and refuses to delete a Website labelled ``protected: "true"``.
Websites are served as v1 (the hub, stored) and as the older v1alpha1, which named a URL where
v1 names a domain; the conversion webhook converts between them.

    kubeloop run examples/website_webhooks --embedded --install-crds   # webhooks installed too
    kubeloop webhook examples/website_webhooks                          # their configurations
"""

from __future__ import annotations

from urllib.parse import urlsplit

import kubeloop
from kubeloop import field

MAX_REPLICAS = 10
DEFAULT_IMAGE = "nginx:1.27"


class WebsiteSpec(kubeloop.KubeModel):
    domain: str
    image: str | None = None
    replicas: int | None = None


class Website(
    kubeloop.CustomResource,
    kubeloop.webhook.Hub,
    group="web.kubeloop.dev",
    version="v1",
    short_names=("ws",),
    storage=True,
):
    """A website served by a Deployment."""

    spec: WebsiteSpec


class WebsiteSpecV1alpha1(kubeloop.KubeModel):
    url: str
    image: str | None = None
    replicas: int | None = None


class WebsiteV1alpha1(kubeloop.CustomResource, group="web.kubeloop.dev", version="v1alpha1", kind="Website"):
    """A website served by a Deployment, at a URL."""

    spec: WebsiteSpecV1alpha1

    def convert_to(self, hub: Website) -> None:
        spec = self.spec
        hub.spec = WebsiteSpec(
            domain=urlsplit(spec.url).hostname or "", image=spec.image, replicas=spec.replicas
        )

    def convert_from(self, hub: Website) -> None:
        spec = hub.spec
        self.spec = WebsiteSpecV1alpha1(
            url=f"https://{spec.domain}/", image=spec.image, replicas=spec.replicas
        )


class WebsiteDefaulter:
    def default(self, website: Website) -> None:
        if website.spec.image is None:
            website.spec.image = DEFAULT_IMAGE
        if website.spec.replicas is None:
            website.spec.replicas = 1


class WebsiteValidator:
    def validate_create(self, website: Website) -> list[str]:
        return self._validate(website)

    def validate_update(self, old: Website, new: Website) -> list[str]:
        if new.spec.domain != old.spec.domain:
            raise kubeloop.webhook.invalid(new, field.forbidden("spec.domain", "the domain cannot change"))
        return self._validate(new)

    def validate_delete(self, website: Website) -> None:
        if (website.metadata.labels or {}).get("protected") == "true":
            raise kubeloop.errors.Forbidden(
                f'website "{website.metadata.name}" is protected: remove the label first'
            )

    def _validate(self, website: Website) -> list[str]:
        replicas = website.spec.replicas or 0
        if replicas > MAX_REPLICAS:
            raise kubeloop.webhook.invalid(
                website, field.invalid("spec.replicas", replicas, f"must be at most {MAX_REPLICAS}")
            )
        image = website.spec.image or ""
        return [f"spec.image {image} is a moving target; pin a version"] if image.endswith(":latest") else []


def setup(manager: kubeloop.Manager) -> None:
    kubeloop.WebhookBuilder(manager).for_(Website).with_defaulter(WebsiteDefaulter()).with_validator(
        WebsiteValidator()
    ).complete()
