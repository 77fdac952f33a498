"""A Website custom resource with a defaulting and a validating webhook: the defaulter fills in the
image and replicas; the validator caps replicas, warns about ``:latest`` images, keeps the
domain unchanged once set and refuses to delete a Website labelled ``protected: "true"``.

    kubeloop run examples/website_webhooks --embedded --install-crds   # webhooks installed too
    kubeloop webhook examples/website_webhooks                          # their configurations
"""

from __future__ import annotations

import kubeloop
from kubeloop import field

MAX_REPLICAS = 10
DEFAULT_IMAGE = "nginx:1.27"


class WebsiteSpec(kubeloop.KubeModel):
    domain: str
    image: str | None = None
    replicas: int | None = None


class Website(kubeloop.CustomResource, group="web.kubeloop.dev", version="v1", short_names=("ws",)):
    """A website served by a Deployment."""

    spec: WebsiteSpec


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
            raise kubeloop.errors.Forbidden(f'website "{website.metadata.name}" is protected: remove the label first')

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
